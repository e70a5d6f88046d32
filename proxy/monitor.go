package proxy

import (
	"strings"

	"github.com/tidwall/redcon"
)

// monitorBridge runs MONITOR mode for c (router/monitor.go says what is fed): +OK, then the
// feed's lines as they come, between the replies to what the client still sends (served as
// any command, and fed too). QUIT ends the connection; RESET leaves MONITOR mode (it is
// served then, as outside: +RESET). A feed that fell behind closes the connection. It returns
// the commands to serve after it, or nil when the connection ended.
func (s *Server) monitorBridge(c *clientConn, rest [][][]byte) [][][]byte {
	write := lockedWrite(c)
	lines, behind, stop := s.router.Monitor()
	defer stop()
	if !write(func(w *redcon.Writer) { w.WriteString("OK") }) {
		return nil
	}
	done := make(chan struct{})
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		for {
			select {
			case <-done:
				return
			case <-c.ctx.Done():
				return
			case line := <-lines:
				if !write(func(w *redcon.Writer) { w.WriteRaw(line) }) {
					_ = c.nc.Close()
					return
				}
				if behind() && len(lines) == 0 {
					s.log.Warn("a MONITOR client fell behind its feed; closing it")
					_ = c.nc.Close()
					return
				}
			}
		}
	}()
	var next [][]byte
	send := func(args [][]byte) bool {
		switch strings.ToLower(string(args[0])) {
		case "quit":
			write(func(w *redcon.Writer) { w.WriteString("OK") })
			return false
		case "reset":
			next = args
			return false
		case "monitor":
			return write(func(w *redcon.Writer) { w.WriteString("OK") })
		}
		return s.serveBetween(c, args, write)
	}
	rest = serveSubscriber(c, nil, rest, send, write)
	stop()
	close(done)
	<-pumped
	if next == nil {
		return nil
	}
	return append([][][]byte{next}, rest...)
}
