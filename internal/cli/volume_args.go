package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mortarfs/mortar/mgmt/api"
)

// parseCreateArgs parses GlusterFS's volume create syntax:
//
//	NAME [replica N [arbiter N]] [disperse [N]] [disperse-data N]
//	     [redundancy N] [transport tcp] host:/path ... [force]
//
// The server checks the volume-type keywords (which counts go together,
// which geometries are possible).
func parseCreateArgs(args []string) (api.CreateVolumeRequest, error) {
	var req api.CreateVolumeRequest
	if len(args) == 0 {
		return req, fmt.Errorf("volume create: a volume name is required")
	}
	req.Name = args[0]
	counts := map[string]*int{
		"replica":       &req.Replica,
		"arbiter":       &req.Arbiter,
		"disperse":      &req.Disperse,
		"disperse-data": &req.DisperseData,
		"redundancy":    &req.Redundancy,
	}
	seen := map[string]bool{}
	for i := 1; i < len(args); i++ {
		a := args[i]
		kw := strings.ToLower(a)
		switch {
		case counts[kw] != nil:
			if seen[kw] {
				return req, fmt.Errorf("volume create: %s given twice", kw)
			}
			seen[kw] = true
			n, ok := countArg(args, i+1)
			switch {
			case ok:
				*counts[kw] = n
				i++
			case kw == "disperse":
				*counts[kw] = -1 // count left to the server, as in GlusterFS
			default:
				return req, fmt.Errorf("volume create: %s needs a positive count, as in \"%s 3\"", kw, kw)
			}
		case kw == "transport":
			if i+1 >= len(args) || strings.ToLower(args[i+1]) != "tcp" {
				return req, fmt.Errorf("volume create: only \"transport tcp\" is supported")
			}
			i++
		case kw == "force":
			req.Force = true
		case strings.Contains(a, ":"):
			req.Bricks = append(req.Bricks, a)
		default:
			return req, fmt.Errorf("volume create: unexpected argument %q; bricks are written host:/path", a)
		}
	}
	if len(req.Bricks) == 0 {
		return req, fmt.Errorf("volume create: no bricks given; write them host:/path")
	}
	return req, nil
}

// countArg returns args[i] as a positive count.
func countArg(args []string, i int) (int, bool) {
	if i >= len(args) {
		return 0, false
	}
	n, err := strconv.Atoi(args[i])
	return n, err == nil && n > 0
}
