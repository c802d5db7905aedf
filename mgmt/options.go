package mgmt

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// Option is a volume option that `volume set` accepts.
type Option struct {
	Key         string
	Default     string
	Description string
	// check returns a problem with value, or "".
	check func(value string) string
}

// Option keys that clients read from the spec.
const (
	OptAttrTimeout     = "performance.attr-timeout"
	OptEntryTimeout    = "performance.entry-timeout"
	OptNegativeTimeout = "performance.negative-timeout"
	OptPingTimeout     = "network.ping-timeout"
)

var knownOptions = []Option{
	{OptAttrTimeout, "1", "seconds the kernel may cache file attributes", seconds(0)},
	{OptEntryTimeout, "1", "seconds the kernel may cache name lookups", seconds(0)},
	{OptNegativeTimeout, "0", "seconds the kernel may cache failed lookups", seconds(0)},
	{OptPingTimeout, "5", "seconds without an answer before a brick counts as down", seconds(1)},
}

// KnownOptions returns the options that `volume set` accepts, sorted by key.
func KnownOptions() []Option {
	out := append([]Option(nil), knownOptions...)
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// seconds accepts a number of seconds (fractions allowed) of at least min.
func seconds(min float64) func(string) string {
	return func(v string) string {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f > 86400 {
			return "must be a number of seconds (at most 86400)"
		}
		if f < min {
			return "must be at least " + strconv.FormatFloat(min, 'f', -1, 64) + " seconds"
		}
		return ""
	}
}

// checkOption validates a `volume set` key and value.
func checkOption(key, value string) error {
	for _, o := range knownOptions {
		if o.Key != key {
			continue
		}
		if msg := o.check(value); msg != "" {
			return errorf(ErrInvalid, "option %s: %q %s", key, value, msg)
		}
		return nil
	}
	keys := make([]string, 0, len(knownOptions))
	for _, o := range KnownOptions() {
		keys = append(keys, o.Key)
	}
	return errorf(ErrInvalid, "unknown option %q; known options: %s", key, strings.Join(keys, ", "))
}
