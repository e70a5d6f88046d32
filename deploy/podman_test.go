package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill-proxy/internal/testenv"
)

// imageTag is the image that the tests build from the repo's Dockerfile.
const imageTag = "localhost/seckill-proxy:test"

var (
	imageOnce sync.Once
	imageErr  error
	// imageMissing: podman could not be installed (scripts/image.sh exit status 3).
	imageMissing bool
)

// builtImage builds the Dockerfile's image with scripts/image.sh, once per test binary, and
// returns its name. Where podman cannot be installed the test is skipped, or fails under
// SECKILL_REQUIRE_SERVICES=1.
func builtImage(t *testing.T) string {
	t.Helper()
	imageOnce.Do(func() {
		var log bytes.Buffer
		imageErr = script(&log, "build", imageTag)
		var exit *exec.ExitError
		imageMissing = errors.As(imageErr, &exit) && exit.ExitCode() == 3
		if imageErr != nil {
			imageErr = errors.New(imageErr.Error() + "\n" + log.String())
		}
	})
	switch {
	case imageMissing && !testenv.Required():
		t.Skip("podman cannot be installed here: ", imageErr)
	case imageErr != nil:
		t.Fatal("scripts/image.sh build: ", imageErr)
	}
	return imageTag
}

// script runs scripts/image.sh with args; its log goes to log and its last line of output
// (an image's name) is returned by scriptOut.
func script(log io.Writer, args ...string) error {
	_, err := scriptOut(log, args...)
	return err
}

func scriptOut(log io.Writer, args ...string) (string, error) {
	cmd := exec.Command("../scripts/image.sh", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, log
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// containersConf is the containers.conf that scripts/image.sh writes for podman here.
func containersConf(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../.stack/image/containers.conf")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// podman runs podman with scripts/image.sh's containers.conf and returns its combined output
// and exit status (0 with a nil error).
func podman(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+containersConf(t))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	default:
		t.Fatalf("podman %s: %v", strings.Join(args, " "), err)
		return "", -1
	}
}

// mustPodman is podman that fails the test unless podman exits 0.
func mustPodman(t *testing.T, args ...string) string {
	t.Helper()
	out, code := podman(t, args...)
	if code != 0 {
		t.Fatalf("podman %s: exit status %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// secret is a random credential.
func secret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// awaitHTTP waits until url answers 200 and returns its body; it fails the test after the
// deadline, with the last answer or error and whatever dump says (a container's log).
func awaitHTTP(t *testing.T, url string, within time.Duration, dump func() string) string {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return string(b)
			}
			last = resp.Status + ": " + string(b)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200 within %v: %s\n%s", url, within, last, dump())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// status is the HTTP status of a GET of url with the given Authorization header ("" for none).
func status(t *testing.T, url, authorization string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// freePorts fails the test if a port it is about to use on loopback is taken.
func freePorts(t *testing.T, ports ...string) {
	t.Helper()
	for _, p := range ports {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+p, time.Second); err == nil {
			_ = c.Close()
			t.Fatalf("port %s is taken (a proxy or sink already running?); stop it first", p)
		}
	}
}
