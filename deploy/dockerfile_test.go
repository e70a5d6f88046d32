package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"seckill-proxy/conf"
)

// TestDockerfile: no container builder runs here, so the image is checked in parts. The build
// stage's go build command, exactly as written but for its output folder, builds both binaries
// from this tree; the builder image's Go is go.mod's; and the runtime stage copies the binaries
// to the paths the manifests run, as a non-root user, listening on the default ports on every
// interface and exposing them.
func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(raw)
	build := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build .*)$`).FindStringSubmatch(df)
	if build == nil {
		t.Fatal("no RUN CGO_ENABLED=0 go build in the Dockerfile")
	}
	out := t.TempDir()
	cmdline := strings.Replace(build[1], "-o /out/", "-o "+out+"/", 1)
	if cmdline == build[1] {
		t.Fatalf("the build command does not write to /out/: %s", build[1])
	}
	cmd := exec.Command("sh", "-c", cmdline)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmdline, err, b)
	}
	for _, bin := range []string{"seckill-proxy", "seckill-sink"} {
		if _, err := os.Stat(filepath.Join(out, bin)); err != nil {
			t.Errorf("the build stage does not make %s: %v", bin, err)
		}
	}

	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(gomod))
	if goVersion == nil || !strings.Contains(df, "\nARG BUILDER_IMAGE=golang:"+goVersion[1]+"-") {
		t.Errorf("the default builder image is not Go %v (go.mod)", goVersion)
	}
	for _, want := range []string{"\nFROM ${BUILDER_IMAGE} AS build\n", "\nFROM ${RUNTIME_IMAGE}\n",
		"\nARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot\n"} {
		if !strings.Contains(df, want) {
			t.Errorf("the Dockerfile lacks %q: the base images are build arguments", strings.TrimSpace(want))
		}
	}

	runtime := df[strings.LastIndex(df, "\nFROM "):]
	for _, want := range []string{
		"COPY --from=build /out/seckill-proxy /out/seckill-sink /",
		"USER nonroot:nonroot",
		`ENTRYPOINT ["/seckill-proxy"]`,
	} {
		if !strings.Contains(runtime, want) {
			t.Errorf("the runtime stage lacks %q", want)
		}
	}
	env := map[string]string{}
	for _, m := range regexp.MustCompile(`(SECKILL_[A-Z_]+)=(\S+)`).FindAllStringSubmatch(runtime, -1) {
		env[m[1]] = m[2]
	}
	exposed := strings.Fields(regexp.MustCompile(`(?m)^EXPOSE (.*)$`).FindStringSubmatch(runtime)[1])
	cfg := conf.Default()
	for name, def := range map[string]string{"SECKILL_LISTEN": cfg.Listen, "SECKILL_ADMIN_LISTEN": cfg.AdminListen,
		"SECKILL_SINK_ADMIN_LISTEN": cfg.Sink.AdminListen} {
		got := env[name]
		if !strings.HasPrefix(got, "0.0.0.0:") || hostPortOf(got) != hostPortOf(def) {
			t.Errorf("%s=%q in the image; want 0.0.0.0 and the default port %s", name, got, hostPortOf(def))
		}
		if !slices.Contains(exposed, hostPortOf(def)) {
			t.Errorf("port %s (%s) is not exposed: EXPOSE %v", hostPortOf(def), name, exposed)
		}
	}
}
