package resp

import "strings"

// UnknownCommand is Redis 7's error text for a command it does not know (without the "-" and
// the CRLF): the name cut at 128 bytes, then the first arguments quoted, until 128 bytes of
// them, with CR and LF turned into spaces so that the error stays on one line.
func UnknownCommand(args [][]byte) string {
	name := args[0]
	if len(name) > 128 {
		name = name[:128]
	}
	var quoted strings.Builder
	for _, a := range args[1:] {
		if quoted.Len() >= 128 {
			break
		}
		if room := 128 - quoted.Len(); len(a) > room {
			a = a[:room]
		}
		quoted.WriteString("'")
		quoted.Write(a)
		quoted.WriteString("' ")
	}
	msg := "ERR unknown command '" + string(name) + "', with args beginning with: " + quoted.String()
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
}

// WrongArity is Redis's error text for a known command with the wrong number of arguments.
func WrongArity(name string) string {
	return "ERR wrong number of arguments for '" + name + "' command"
}

// refusedCodes are the error codes with which Redis refuses a command before running it:
// the cluster's redirections and its down state, a script it does not hold, a server still
// loading, a replica whose master is down, and another script running. Inside a script, a
// command's failure comes back as ERR (or the command's own code, after the script's
// earlier writes): never as one of these.
var refusedCodes = []string{"MOVED ", "ASK ", "TRYAGAIN ", "CLUSTERDOWN ", "NOSCRIPT ", "LOADING ", "MASTERDOWN ", "BUSY "}

// RefusedBeforeRun says whether raw, one whole reply, is an error with which Redis refused
// the command before running it (refusedCodes): the command wrote nothing.
func RefusedBeforeRun(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '-' {
		return false
	}
	for _, code := range refusedCodes {
		if len(raw) > len(code) && string(raw[1:1+len(code)]) == code {
			return true
		}
	}
	return false
}
