package state

import "github.com/mortarfs/mortar/tlsconf"

// revoke records serial as revoked in s (a command the state applies).
func (s *State) revoke(serial, note string) error {
	if err := tlsconf.CheckSerial(serial); err != nil {
		return err
	}
	if _, ok := s.Revoked[serial]; ok {
		return nil
	}
	if s.Revoked == nil {
		s.Revoked = map[string]string{}
	}
	s.Revoked[serial] = note
	return nil
}
