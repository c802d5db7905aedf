module github.com/mortarfs/mortar

go 1.26.8

require (
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/klauspost/reedsolomon v1.14.2
	github.com/spf13/cobra v1.10.2
	golang.org/x/sys v0.49.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/klauspost/cpuid/v2 v2.3.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
)
