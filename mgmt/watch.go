package mgmt

import "net/http"

// serveSpec answers GET /v1/volumes/{name}/spec.
func (n *Node) serveSpec(w http.ResponseWriter, r *http.Request) {
	spec, err := n.spec(r.PathValue("name"))
	n.reply(w, r, http.StatusOK, spec, err)
}
