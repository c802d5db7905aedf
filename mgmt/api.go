package mgmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
)

// maxRequestBody bounds the JSON body of an API request.
const maxRequestBody = 1 << 20

// The HTTP API, version 1. Every answer is JSON; failures are
// {"error": "...", "kind": "..."} with a matching HTTP status.
//
//	GET    /v1/node                          NodeInfo
//	GET    /v1/volumes                       []VolumeInfo
//	POST   /v1/volumes                       CreateVolumeRequest → VolumeInfo (201)
//	GET    /v1/volumes/{name}                VolumeInfo
//	DELETE /v1/volumes/{name}                {}
//	POST   /v1/volumes/{name}/start          StartRequest → VolumeInfo
//	POST   /v1/volumes/{name}/stop           VolumeInfo
//	GET    /v1/volumes/{name}/status         VolumeStatus
//	PUT    /v1/volumes/{name}/options/{key}  SetOptionRequest → VolumeInfo
//	DELETE /v1/volumes/{name}/options/{key}  VolumeInfo (the option back to its default)
//	DELETE /v1/volumes/{name}/options        VolumeInfo (every option back to its default)
//	GET    /v1/volumes/{name}/spec           volume.Spec (started volumes only)
//	POST   /v1/volumes/{name}/heal           HealRequest → FullHeal ({} for an index heal)
//	GET    /v1/volumes/{name}/heal           HealInfo
//	GET    /v1/volumes/{name}/heal/split-brain   SplitBrainInfo
//	POST   /v1/volumes/{name}/heal/split-brain   SplitBrainRequest → SplitBrainResolved
//	POST   /v1/volumes/{name}/reset-brick    ResetBrickRequest → VolumeInfo
//
// The heal endpoints are for started replicated and dispersed volumes
// (others are refused: "neither replicated nor dispersed", kind invalid;
// "not started", kind state); resolving split-brains is for replicated
// volumes only.
// POST heal makes the heal daemon scan the heal indexes now, or with
// {"full": true} starts a full heal (a crawl of every replica set) in the
// background and answers at once with its state, which GET heal shows
// too; asked during a full heal, another crawl follows it. POST
// heal/split-brain resolves split-brains by "latest-mtime" or
// "bigger-file" (a path is required) or "source-brick" (source
// "host:/path" required; without a path, every split-brain of its set);
// a request naming nothing in split-brain is refused. POST reset-brick
// takes a brick whose directory is new and empty (a replaced disk): it
// marks it as the volume's brick again and as needing everything the
// other bricks of its set have, restarts it and starts a full heal; a
// directory that holds anything is refused.
func (n *Node) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/node", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, n.nodeInfo())
	})
	mux.HandleFunc("GET /v1/volumes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, n.list())
	})
	mux.HandleFunc("POST /v1/volumes", func(w http.ResponseWriter, r *http.Request) {
		var req api.CreateVolumeRequest
		if !readJSON(w, r, &req) {
			return
		}
		vi, err := n.createVolume(r.Context(), req)
		n.reply(w, r, http.StatusCreated, vi, err)
	})
	mux.HandleFunc("GET /v1/volumes/{name}", func(w http.ResponseWriter, r *http.Request) {
		vi, err := n.info(r.PathValue("name"))
		n.reply(w, r, http.StatusOK, vi, err)
	})
	mux.HandleFunc("DELETE /v1/volumes/{name}", func(w http.ResponseWriter, r *http.Request) {
		err := n.deleteVolume(r.PathValue("name"))
		n.reply(w, r, http.StatusOK, struct{}{}, err)
	})
	mux.HandleFunc("POST /v1/volumes/{name}/start", func(w http.ResponseWriter, r *http.Request) {
		var req api.StartRequest
		if !readJSON(w, r, &req) {
			return
		}
		vi, err := n.startVolume(r.PathValue("name"), req.Force)
		n.reply(w, r, http.StatusOK, vi, err)
	})
	mux.HandleFunc("POST /v1/volumes/{name}/stop", func(w http.ResponseWriter, r *http.Request) {
		vi, err := n.stopVolume(r.PathValue("name"))
		n.reply(w, r, http.StatusOK, vi, err)
	})
	mux.HandleFunc("GET /v1/volumes/{name}/status", func(w http.ResponseWriter, r *http.Request) {
		vs, err := n.status(r.Context(), r.PathValue("name"))
		n.reply(w, r, http.StatusOK, vs, err)
	})
	mux.HandleFunc("PUT /v1/volumes/{name}/options/{key}", func(w http.ResponseWriter, r *http.Request) {
		var req api.SetOptionRequest
		if !readJSON(w, r, &req) {
			return
		}
		vi, err := n.setOption(r.PathValue("name"), r.PathValue("key"), req.Value)
		n.reply(w, r, http.StatusOK, vi, err)
	})
	mux.HandleFunc("DELETE /v1/volumes/{name}/options/{key}", func(w http.ResponseWriter, r *http.Request) {
		vi, err := n.resetOption(r.PathValue("name"), r.PathValue("key"))
		n.reply(w, r, http.StatusOK, vi, err)
	})
	mux.HandleFunc("DELETE /v1/volumes/{name}/options", func(w http.ResponseWriter, r *http.Request) {
		vi, err := n.resetOption(r.PathValue("name"), "")
		n.reply(w, r, http.StatusOK, vi, err)
	})
	mux.HandleFunc("GET /v1/volumes/{name}/spec", n.serveSpec)
	n.healHandlers(mux)
	n.clusterHandlers(mux)
	n.revokeHandlers(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, api.ErrorBody{Error: fmt.Sprintf("no such API endpoint: %s %s", r.Method, r.URL.Path)})
	})
	return n.logRequests(n.route(mux))
}

// healHandlers adds the endpoints of self-heal and reset-brick.
func (n *Node) healHandlers(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/volumes/{name}/heal", func(w http.ResponseWriter, r *http.Request) {
		var req api.HealRequest
		if !readJSON(w, r, &req) {
			return
		}
		fh, err := n.heal(r.Context(), r.PathValue("name"), req.Full)
		var out any = fh
		if !req.Full {
			out = struct{}{}
		}
		n.reply(w, r, http.StatusOK, out, err)
	})
	mux.HandleFunc("POST /v1/local/volumes/{id}/heal", handle(n, func(r *http.Request, req api.HealRequest) (any, error) {
		d, err := n.localHealDaemon(r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return d.Heal(req.Full)
	}))
	mux.HandleFunc("GET /v1/local/volumes/{id}/heal", handle(n, func(r *http.Request, _ struct{}) (any, error) {
		d, err := n.localHealDaemon(r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return d.Counts(r.Context())
	}))
	mux.HandleFunc("GET /v1/volumes/{name}/heal", func(w http.ResponseWriter, r *http.Request) {
		hi, err := n.healInfo(r.Context(), r.PathValue("name"))
		n.reply(w, r, http.StatusOK, hi, err)
	})
	mux.HandleFunc("GET /v1/volumes/{name}/heal/split-brain", func(w http.ResponseWriter, r *http.Request) {
		sb, err := n.splitBrainInfo(r.Context(), r.PathValue("name"))
		n.reply(w, r, http.StatusOK, sb, err)
	})
	mux.HandleFunc("POST /v1/volumes/{name}/heal/split-brain", func(w http.ResponseWriter, r *http.Request) {
		var req api.SplitBrainRequest
		if !readJSON(w, r, &req) {
			return
		}
		paths, err := n.resolveSplitBrain(r.Context(), r.PathValue("name"), req)
		n.reply(w, r, http.StatusOK, api.SplitBrainResolved{Paths: paths}, err)
	})
	mux.HandleFunc("POST /v1/volumes/{name}/replace-brick", func(w http.ResponseWriter, r *http.Request) {
		var req api.ReplaceBrickRequest
		if !readJSON(w, r, &req) {
			return
		}
		vi, err := n.replaceBrick(r.Context(), r.PathValue("name"), req)
		n.reply(w, r, http.StatusOK, vi, err)
	})
	mux.HandleFunc("POST /v1/volumes/{name}/reset-brick", func(w http.ResponseWriter, r *http.Request) {
		var req api.ResetBrickRequest
		if !readJSON(w, r, &req) {
			return
		}
		vi, err := n.resetBrick(r.Context(), r.PathValue("name"), req.Brick)
		n.reply(w, r, http.StatusOK, vi, err)
	})
}

// logRequests logs every request at debug level.
func (n *Node) logRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		n.log.Debug("api request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "took", time.Since(start))
	})
}

// reply writes v with status ok, or err as an error body.
func (n *Node) reply(w http.ResponseWriter, r *http.Request, ok int, v any, err error) {
	if err == nil {
		writeJSON(w, ok, v)
		return
	}
	code := statusFor(err)
	if code == http.StatusInternalServerError {
		n.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	} else {
		n.log.Info("api request refused", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeJSON(w, code, api.ErrorBody{Error: err.Error(), Kind: api.MarkerName(err)})
}

// statusFor maps an error to its HTTP status.
func statusFor(err error) int {
	switch {
	case errors.Is(err, api.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, api.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, api.ErrExists), errors.Is(err, api.ErrState):
		return http.StatusConflict
	case errors.Is(err, api.ErrUnsupported):
		return http.StatusNotImplemented
	case errors.Is(err, api.ErrNoQuorum):
		return http.StatusServiceUnavailable
	case errors.Is(err, api.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, api.ErrUnauthenticated):
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}

// readJSON decodes the request body into v (an empty body leaves v
// zero); on failure it answers 400 and returns false.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		writeJSON(w, http.StatusBadRequest, api.ErrorBody{Error: "bad request body: " + err.Error(), Kind: "invalid"})
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v) //nolint:errcheck // the client went away; nothing to do
}
