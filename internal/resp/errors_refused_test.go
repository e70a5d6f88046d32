package resp

import "testing"

func TestRefusedBeforeRun(t *testing.T) {
	for raw, want := range map[string]bool{
		"-CLUSTERDOWN The cluster is down\r\n":                                     true,
		"-MOVED 3999 127.0.0.1:7001\r\n":                                           true,
		"-ASK 3999 127.0.0.1:7001\r\n":                                             true,
		"-TRYAGAIN Multiple keys request during rehashing of slot\r\n":             true,
		"-NOSCRIPT No matching script. Please use EVAL.\r\n":                       true,
		"-LOADING Redis is loading the dataset in memory\r\n":                      true,
		"-MASTERDOWN Link with MASTER is down\r\n":                                 true,
		"-BUSY Redis is busy running a script.\r\n":                                true,
		"-ERR Script attempted to execute a command while the cluster is down\r\n": false,
		"-ERR user_script:1: oops\r\n":                                             false,
		"-NOPERM this user has no permissions\r\n":                                 false,
		"-OOM command not allowed\r\n":                                             false,
		"-CLUSTERDOWNX\r\n":                                                        false,
		"-MOVED":                                                                   false,
		"+OK\r\n":                                                                  false,
		"*1\r\n-MOVED 1 a:1\r\n":                                                   false,
		"":                                                                         false,
		"-":                                                                        false,
	} {
		if got := RefusedBeforeRun([]byte(raw)); got != want {
			t.Errorf("%q: %v, want %v", raw, got, want)
		}
	}
}
