package bench

// Experiments lists every experiment in the order the suite runs them.
func Experiments() []Experiment {
	return []Experiment{seed002(), seed000(), seed001(), seed003(), seed004(), metadata(), sqliteTx()}
}
