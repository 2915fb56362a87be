// Package ntpserver is a minimal NTP server for tests: it answers every client request (mode 3) as a
// stratum-1 server whose clock is the host's plus Skew. No test VM reaches a real time server, so the
// tests serve one.
package ntpserver

import (
	"encoding/binary"
	"net"
	"time"
)

// ntpEpochOffset is the seconds from 1900-01-01 (NTP's epoch) to 1970-01-01 (Unix's).
const ntpEpochOffset = 2208988800

// Server answers NTP on a UDP socket until it is closed.
type Server struct {
	Conn net.PacketConn
	Skew time.Duration
}

// Listen starts a server on addr ("127.0.0.1:0" for any free port); Close stops it.
func Listen(addr string, skew time.Duration) (*Server, error) {
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{Conn: c, Skew: skew}
	go s.serve()
	return s, nil
}

// Port is the UDP port the server answers on.
func (s *Server) Port() int { return s.Conn.LocalAddr().(*net.UDPAddr).Port }

// Close stops the server.
func (s *Server) Close() error { return s.Conn.Close() }

func (s *Server) serve() {
	buf := make([]byte, 512)
	for {
		n, from, err := s.Conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if n < 48 || buf[0]&0x7 != 3 { // not a client request
			continue
		}
		received := time.Now().Add(s.Skew)
		var r [48]byte
		r[0] = 0<<6 | (buf[0]>>3&0x7)<<3 | 4 // no leap warning, the client's version, mode 4 (server)
		r[1] = 1                             // stratum 1: a reference clock
		r[2] = buf[2]                        // the client's poll
		r[3] = 0xec                          // precision 2^-20 s
		copy(r[12:16], "LOCL")
		putTime(r[16:24], received.Add(-time.Second)) // reference: when the clock was last set
		copy(r[24:32], buf[40:48])                    // origin: the client's transmit time, echoed
		putTime(r[32:40], received)
		putTime(r[40:48], time.Now().Add(s.Skew))
		if _, err := s.Conn.WriteTo(r[:], from); err != nil {
			return
		}
	}
}

func putTime(b []byte, t time.Time) {
	secs := uint64(t.Unix()) + ntpEpochOffset
	frac := uint64(t.Nanosecond()) << 32 / 1e9
	binary.BigEndian.PutUint32(b[0:4], uint32(secs))
	binary.BigEndian.PutUint32(b[4:8], uint32(frac))
}
