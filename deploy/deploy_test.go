// Package deploy holds the Kubernetes manifests (k8s/) and the Grafana dashboard (grafana/);
// its test checks the manifests against the Kubernetes API types and the binaries' defaults.
package deploy

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"seckill-proxy/conf"
)

// objects decodes every document of a manifest strictly (an unknown field is an error) into
// its kind's API type.
func objects(t *testing.T, path string) []any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var meta struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s document %d: %v", path, i, err)
		}
		var obj any
		switch meta.APIVersion + " " + meta.Kind {
		case "v1 ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1 Secret":
			obj = &corev1.Secret{}
		case "v1 Service":
			obj = &corev1.Service{}
		case "apps/v1 Deployment":
			obj = &appsv1.Deployment{}
		case "policy/v1 PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		default:
			t.Fatalf("%s document %d: unexpected %s %s", path, i, meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s document %d (%s): %v", path, i, meta.Kind, err)
		}
		out = append(out, obj)
	}
	return out
}

func find[T any](objs []any) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// port is the number of c's port named by p (a name or a number).
func port(t *testing.T, c corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %s", c.Name, p.StrVal)
	return 0
}

func hostPortOf(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }

// checkProbes: the container's probes hit the admin port's real paths.
func checkProbes(t *testing.T, c corev1.Container, admin string) {
	t.Helper()
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", c.Name, name)
			continue
		}
		if got := fmt.Sprint(port(t, c, p.HTTPGet.Port)); got != admin {
			t.Errorf("%s: %s probe on port %s, the admin port is %s", c.Name, name, got, admin)
		}
		want := map[string]string{"liveness": "/livez", "readiness": "/readyz"}[name]
		if p.HTTPGet.Path != want {
			t.Errorf("%s: %s probe on %s, want %s", c.Name, name, p.HTTPGet.Path, want)
		}
	}
}

func TestProxySidecarManifest(t *testing.T) {
	objs := objects(t, "k8s/proxy-sidecar.yaml")
	cms := find[*corev1.ConfigMap](objs)
	if len(cms) != 1 {
		t.Fatalf("%d ConfigMaps, want 1", len(cms))
	}
	// The mounted configuration, with the Secret's variables, is one the proxy accepts, as
	// -check-config would judge it.
	file := t.TempDir() + "/config.yaml"
	if err := os.WriteFile(file, []byte(cms[0].Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	environ := []string{conf.EnvConfigFile + "=" + file}
	secrets := find[*corev1.Secret](objs)
	if len(secrets) != 1 {
		t.Fatalf("%d Secrets, want 1", len(secrets))
	}
	for k, v := range secrets[0].StringData {
		environ = append(environ, k+"="+v)
	}
	cfg, err := conf.Load(nil, environ)
	if err != nil {
		t.Fatalf("the ConfigMap and Secret do not load: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the ConfigMap and Secret do not validate: %v", err)
	}
	// As shipped, its secrets are placeholders, which the proxy refuses to run with.
	if u := cfg.Unsafe(); len(u) < 4 {
		t.Errorf("the Secret's placeholders are not all refused: %q", u)
	}
	// With them replaced, it passes -check-config -strict, as the manifest's header says: no
	// warning either.
	filled := append([]string(nil), environ...)
	for i, kv := range filled {
		filled[i] = strings.ReplaceAll(kv, "CHANGE-ME", "s3cret-"+strconv.Itoa(i))
	}
	var out strings.Builder
	if _, err := conf.ParseCommandLine("seckill-proxy", []string{"-check-config", "-strict"}, filled, &out); err != nil {
		t.Errorf("the ConfigMap with real secrets fails -check-config -strict: %v\n%s", err, out.String())
	}
	deps := find[*appsv1.Deployment](objs)
	if len(deps) != 1 {
		t.Fatalf("%d Deployments, want 1", len(deps))
	}
	spec := deps[0].Spec.Template.Spec
	var sidecar *corev1.Container
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == "seckill-proxy" {
			sidecar = &spec.InitContainers[i]
		}
	}
	if sidecar == nil {
		t.Fatal("no seckill-proxy init container")
	}
	if sidecar.RestartPolicy == nil || *sidecar.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Error("the proxy is not a native sidecar (restartPolicy: Always)")
	}
	admin := hostPortOf(cfg.AdminListen)
	checkProbes(t, *sidecar, admin)
	if sidecar.StartupProbe == nil || sidecar.StartupProbe.HTTPGet == nil || sidecar.StartupProbe.HTTPGet.Path != "/readyz" {
		t.Error("the sidecar has no startup probe on /readyz: the application could start before it")
	}
	if sidecar.Lifecycle == nil || sidecar.Lifecycle.PreStop == nil {
		t.Error("the sidecar has no preStop")
	}
	if sidecar.Resources.Requests.Cpu().IsZero() || sidecar.Resources.Limits.Memory().IsZero() {
		t.Error("the sidecar has no CPU request or memory limit")
	}
	resp := hostPortOf(cfg.Listen)
	var hasResp bool
	for _, p := range sidecar.Ports {
		hasResp = hasResp || fmt.Sprint(p.ContainerPort) == resp
	}
	if !hasResp {
		t.Errorf("the sidecar does not expose the RESP port %s", resp)
	}
	if len(sidecar.EnvFrom) == 0 || sidecar.EnvFrom[0].SecretRef == nil {
		t.Error("the sidecar does not take its secrets from a Secret")
	}
	if a := deps[0].Spec.Template.Annotations; a["prometheus.io/port"] != admin || a["prometheus.io/path"] != "/metrics" {
		t.Errorf("scrape annotations %v, want port %s path /metrics", a, admin)
	}
	if len(find[*corev1.Service](objs)) != 1 {
		t.Error("want one Service")
	}
}

func TestSinkManifest(t *testing.T) {
	objs := objects(t, "k8s/sink.yaml")
	deps := find[*appsv1.Deployment](objs)
	if len(deps) != 1 || len(find[*policyv1.PodDisruptionBudget](objs)) != 1 || len(find[*corev1.Service](objs)) != 1 {
		t.Fatal("want one Deployment, one PodDisruptionBudget and one Service")
	}
	c := deps[0].Spec.Template.Spec.Containers[0]
	var admin string
	for _, e := range c.Env {
		if e.Name == "SECKILL_SINK_ADMIN_LISTEN" {
			admin = hostPortOf(e.Value)
		}
	}
	if admin == "" {
		admin = hostPortOf(conf.Default().Sink.AdminListen)
	}
	checkProbes(t, c, admin)
	if len(c.Command) == 0 || c.Command[0] != "/seckill-sink" {
		t.Errorf("the sink runs %v, want /seckill-sink (the image's path)", c.Command)
	}
	pdb := find[*policyv1.PodDisruptionBudget](objs)[0]
	if pdb.Spec.Selector == nil || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != deps[0].Spec.Template.Labels["app.kubernetes.io/name"] {
		t.Error("the PodDisruptionBudget does not select the sink's pods")
	}
	if *deps[0].Spec.Replicas < 2 {
		t.Error("a single sink: the PodDisruptionBudget would block every drain")
	}
}
