package niceness

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// TestLowerReachesEveryThread runs in a child process (a test binary's nice value must not
// leak into the other tests): every thread the child has after Lower, and a thread the Go
// runtime starts after it, have the nice value asked for.
func TestLowerReachesEveryThread(t *testing.T) {
	out, err := exec.Command(testBinary(t), "-test.run=^TestLowerChild$", "-test.v").CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "child: every thread at 7") {
		t.Fatalf("child did not report every thread at nice 7:\n%s", out)
	}
}

const childEnv = "NICENESS_TEST_CHILD"

func testBinary(t *testing.T) string {
	t.Helper()
	t.Setenv(childEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestLowerChild is TestLowerReachesEveryThread's child; alone it does nothing.
func TestLowerChild(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("run by TestLowerReachesEveryThread")
	}
	n, err := Lower(7)
	if err != nil || n < 1 {
		t.Fatalf("Lower(7) = %d, %v", n, err)
	}
	// Threads started after Lower: goroutines locked to threads of their own, all blocked at
	// once, so that the runtime must make new ones.
	var ready, release sync.WaitGroup
	release.Add(1)
	for range 16 {
		ready.Add(1)
		go func() {
			runtime.LockOSThread()
			ready.Done()
			release.Wait()
		}()
	}
	ready.Wait()
	tids, err := threads()
	if err != nil {
		t.Fatal(err)
	}
	if len(tids) < 17 {
		t.Fatalf("only %d threads", len(tids))
	}
	for _, tid := range tids {
		v, err := Of(tid)
		if err != nil {
			t.Fatal(err)
		}
		if v != 7 {
			t.Fatalf("thread %d at nice %d, want 7", tid, v)
		}
	}
	// Lower never raises priority: asking for less than the threads have changes nothing.
	if _, err := Lower(3); err != nil {
		t.Fatal(err)
	}
	if v, _ := Of(0); v != 7 {
		t.Fatalf("Lower(3) moved the caller from 7 to %d", v)
	}
	release.Done()
	t.Log("child: every thread at 7")
}
