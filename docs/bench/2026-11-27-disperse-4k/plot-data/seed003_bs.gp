set terminal pngcairo noenhanced size 1300,880 font 'sans,10'
set output '../seed003_bs.png'
set multiplot layout 2,2 title 'seed 003: fio bandwidth vs block size' font 'sans,12'
set grid
set key outside right top vertical font 'sans,8' samplen 2
set bars small
set offsets graph 0.03, graph 0.03, 0, 0
set title 'write, threads=1'
set xlabel 'block size (KiB)'
set ylabel 'MB/s (log)'
set logscale x 2
set xtics autofreq
set logscale y 10
set yrange [*:*]
plot 'seed003_bs.dat' index 0 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#d62728' pt 9 dt 4 ps 0.8 title 'mortar disperse 4+2', \
     'seed003_bs.dat' index 1 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' pt 9 dt 4 ps 0.8 title 'glusterfs disperse 4+2'
set title 'write, threads=4'
set xlabel 'block size (KiB)'
set ylabel 'MB/s (log)'
set logscale x 2
set xtics autofreq
set logscale y 10
set yrange [*:*]
plot 'seed003_bs.dat' index 2 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#d62728' pt 9 dt 4 ps 0.8 title 'mortar disperse 4+2', \
     'seed003_bs.dat' index 3 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' pt 9 dt 4 ps 0.8 title 'glusterfs disperse 4+2'
set title 'randread, threads=1'
set xlabel 'block size (KiB)'
set ylabel 'MB/s (log)'
set logscale x 2
set xtics autofreq
set logscale y 10
set yrange [*:*]
plot 'seed003_bs.dat' index 4 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#d62728' pt 9 dt 4 ps 0.8 title 'mortar disperse 4+2', \
     'seed003_bs.dat' index 5 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' pt 9 dt 4 ps 0.8 title 'glusterfs disperse 4+2'
set title 'randread, threads=4'
set xlabel 'block size (KiB)'
set ylabel 'MB/s (log)'
set logscale x 2
set xtics autofreq
set logscale y 10
set yrange [*:*]
plot 'seed003_bs.dat' index 6 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#d62728' pt 9 dt 4 ps 0.8 title 'mortar disperse 4+2', \
     'seed003_bs.dat' index 7 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' pt 9 dt 4 ps 0.8 title 'glusterfs disperse 4+2'
unset multiplot
