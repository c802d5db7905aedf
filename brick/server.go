// Package brick serves layers (a brick's storage stack) to remote clients
// over mortar's wire protocol.
package brick

import (
	"log/slog"
	"net"

	"github.com/mortarfs/mortar/layer"
)

// Server serves any number of bricks; a client names the brick (and the
// volume it expects it to belong to) in its handshake.
type Server struct {
	log *slog.Logger
}

// NewServer returns a server with no bricks.
func NewServer(log *slog.Logger) *Server { return &Server{log: log} }

// Add starts serving l as brick id of volume volumeID.
func (s *Server) Add(id, volumeID string, l layer.Layer) { panic("TODO") }

// Remove stops serving brick id and closes its connections.
func (s *Server) Remove(id string) { panic("TODO") }

// ServeConn serves one connection until it closes. The connection must
// start with wire.Magic.
func (s *Server) ServeConn(c net.Conn) { panic("TODO") }

// Serve accepts connections on l until it is closed.
func (s *Server) Serve(l net.Listener) error { panic("TODO") }

// Close stops serving and closes every connection.
func (s *Server) Close() error { panic("TODO") }
