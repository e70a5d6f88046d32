package deploy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"seckill-proxy/conf"
	"seckill-proxy/internal/connect"
	"seckill-proxy/internal/testenv"
)

// What podman kube play (4.3, Debian 12) does not do as Kubernetes does, and how podTest
// adapts the manifests for it; everything else is played as written:
//   - Native sidecars (an init container with restartPolicy: Always): podman runs init
//     containers to completion before the others, so the proxy would block the pod. It is
//     played as the pod's first regular container.
//   - A Secret with envFrom: podman 4.3 stores a played Secret in a form that envFrom cannot
//     read back ("is not valid JSON", containers/podman#16269). The Secret is created with
//     podman secret create, as the JSON of base64 values that envFrom reads.
//   - Probes: podman runs a livenessProbe's httpGet as curl inside the container (the image
//     has no shell and no curl) on a systemd timer (this machine has no systemd), and ignores
//     readiness and startup probes. They are left out of the play; the test requests each
//     probe's path itself, as the kubelet would.
//   - replicas: each replica is a pod of its own, and on the host network they would share
//     the ports; one is played. Services and the PodDisruptionBudget are not played.
//   - hostNetwork: the pods run on the host's network, where the dev stack listens; podman
//     refuses containerPorts there, so they are left out (the containers listen all the same).
//   - lifecycle.preStop.sleep is ignored.
//   - A ConfigMap volume is a named podman volume that every pod mounting the ConfigMap shares,
//     and kube play rewrites its files for each pod it plays, while the pods played before
//     are already starting: the proxy once read its config.yaml truncated (and came up with
//     no Redis username) as the sink's pod rewrote it. Kubernetes gives each pod its own
//     volume, swapped in atomically; each Deployment gets its own copy of the ConfigMap.
// The image names are the locally built image and a busybox stand-in for the application.

// podPlay is what TestPod plays: the manifests' objects, adapted as said above.
type podPlay struct {
	configMaps  []*corev1.ConfigMap
	secret      map[string]string
	deployments []*appsv1.Deployment
	// probes are the paths that the left-out probes asked for, by container: port -> paths.
	probes map[string][]string
}

// adapt turns the manifests' objects into a play for podman, with img for the proxy's image,
// app for the application's, and the Secret's values replaced by secrets.
func adapt(t *testing.T, img, app string, secrets map[string]string, files ...string) podPlay {
	t.Helper()
	p := podPlay{secret: map[string]string{}, probes: map[string][]string{}}
	for _, f := range files {
		for _, o := range objects(t, f) {
			switch o := o.(type) {
			case *corev1.ConfigMap:
				p.configMaps = append(p.configMaps, o)
			case *corev1.Secret:
				for k := range o.StringData {
					v, ok := secrets[k]
					if !ok {
						t.Fatalf("%s: the Secret's %s has no value in the test", f, k)
					}
					p.secret[k] = v
				}
			case *appsv1.Deployment:
				one := int32(1)
				o.Spec.Replicas = &one
				spec := &o.Spec.Template.Spec
				spec.HostNetwork = true
				var sidecars []corev1.Container
				var inits []corev1.Container
				for _, c := range spec.InitContainers {
					if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
						c.RestartPolicy = nil
						sidecars = append(sidecars, c)
					} else {
						inits = append(inits, c)
					}
				}
				spec.InitContainers = inits
				spec.Containers = append(sidecars, spec.Containers...)
				for i := range spec.Containers {
					c := &spec.Containers[i]
					if strings.Contains(c.Image, "/seckill-proxy:") {
						c.Image = img
					} else {
						c.Image = app
					}
					for _, probe := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
						if probe != nil && probe.HTTPGet != nil {
							port := strconv.Itoa(int(port(t, *c, probe.HTTPGet.Port)))
							p.probes[port] = append(p.probes[port], probe.HTTPGet.Path)
						}
					}
					c.LivenessProbe, c.ReadinessProbe, c.StartupProbe = nil, nil, nil
					c.Lifecycle = nil
					c.Ports = nil
				}
				p.deployments = append(p.deployments, o)
			}
		}
	}
	p.configMaps = ownConfigMaps(t, p.configMaps, p.deployments)
	return p
}

// ownConfigMaps gives each Deployment's ConfigMap volumes a copy of their own, named after the
// Deployment, and returns the copies.
func ownConfigMaps(t *testing.T, cms []*corev1.ConfigMap, deps []*appsv1.Deployment) []*corev1.ConfigMap {
	t.Helper()
	byName := map[string]*corev1.ConfigMap{}
	for _, cm := range cms {
		byName[cm.Name] = cm
	}
	var own []*corev1.ConfigMap
	for _, d := range deps {
		for i := range d.Spec.Template.Spec.Volumes {
			ref := d.Spec.Template.Spec.Volumes[i].ConfigMap
			if ref == nil {
				continue
			}
			cm, ok := byName[ref.Name]
			if !ok {
				t.Fatalf("Deployment %s mounts ConfigMap %s, which no manifest played defines", d.Name, ref.Name)
			}
			cp := cm.DeepCopy()
			cp.Name = cm.Name + "-" + d.Name
			ref.Name = cp.Name
			own = append(own, cp)
		}
	}
	return own
}

// yaml is the play as one multi-document YAML file.
func (p podPlay) yaml(t *testing.T) []byte {
	t.Helper()
	var docs []string
	add := func(o any) {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	for _, cm := range p.configMaps {
		cm.APIVersion, cm.Kind = "v1", "ConfigMap"
		add(cm)
	}
	for _, d := range p.deployments {
		d.APIVersion, d.Kind = "apps/v1", "Deployment"
		add(d)
	}
	return []byte(strings.Join(docs, "---\n"))
}

// TestPod plays deploy/k8s (the application with the proxy as its sidecar, and the sink) with
// podman kube play against the dev stack, adapted only where podman differs (see above), and
// shows that the application container reaches the proxy on 127.0.0.1:6380, that the admin
// port needs its token for its guarded paths, that the probes' paths answer, that the
// containers run as nonroot on a read-only root with the memory limit, and that a sale through
// the pod's proxy keeps every invariant.
func TestPod(t *testing.T) {
	img := builtImage(t)
	app, err := scriptOut(os.Stderr, "app-standin")
	if err != nil {
		t.Fatal("scripts/image.sh app-standin: ", err)
	}
	testenv.Redis(t)
	testenv.Kafka(t)
	testenv.MySQL(t)
	cfg := testenv.Config(t)
	freePorts(t, "6380", "6381", "6382")

	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() { testenv.DeleteTopics(t, cfg.Kafka.Brokers, "seckill.pod."+run) }) // after the pods are down
	shopPassword, opsPassword, token, redisPassword := secret(t), secret(t), secret(t), secret(t)
	secrets := map[string]string{
		"SECKILL_USERS":                      "shop:" + shopPassword + ":app,ops:" + opsPassword + ":admin",
		"SECKILL_ADMIN_TOKEN":                token,
		"SECKILL_REDIS_PASSWORD":             redisPassword,
		"SECKILL_REDIS_PASSTHROUGH_PASSWORD": secret(t),
		"SECKILL_MYSQL_DSN":                  cfg.MySQL.DSN,
	}
	play := adapt(t, img, app, secrets, "k8s/proxy-sidecar.yaml", "k8s/sink.yaml")
	// The dev stack's addresses, a topic and a consumer group of this run's own, and its one
	// broker: in the Secret, as an operator would set them.
	play.secret["SECKILL_REDIS_ADDRS"] = strings.Join(cfg.Redis.Addrs, ",")
	play.secret["SECKILL_KAFKA_BROKERS"] = strings.Join(cfg.Kafka.Brokers, ",")
	play.secret["SECKILL_KAFKA_REPLICATION_FACTOR"] = "1"
	play.secret["SECKILL_KAFKA_TOPIC"] = "seckill.pod." + run
	play.secret["SECKILL_KAFKA_GROUP"] = "seckill-pod-" + run

	// The proxy's own Redis user, as docs/PRODUCTION.md has it, on every node. The dev stack's
	// pass-through user has no password (nopass accepts any).
	redisUser(t, cfg, "seckill", redisPassword)

	js := map[string]string{}
	for k, v := range play.secret {
		js[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	sj, err := json.Marshal(js)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	secretFile, playFile := filepath.Join(dir, "secret.json"), filepath.Join(dir, "play.yaml")
	if err := os.WriteFile(secretFile, sj, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(playFile, play.yaml(t), 0o600); err != nil {
		t.Fatal(err)
	}
	podman(t, "kube", "down", playFile)
	podman(t, "secret", "rm", "seckill-proxy")
	mustPodman(t, "secret", "create", "seckill-proxy", secretFile)
	t.Cleanup(func() { podman(t, "secret", "rm", "seckill-proxy") })
	out := mustPodman(t, "kube", "play", playFile)
	t.Cleanup(func() {
		if t.Failed() {
			for _, c := range []string{"shop-pod-0-seckill-proxy", "seckill-sink-pod-0-seckill-sink"} {
				logs, _ := podman(t, "logs", "--tail", "40", c)
				t.Logf("%s:\n%s", c, logs)
			}
		}
		podman(t, "kube", "down", playFile)
		for _, cm := range play.configMaps {
			podman(t, "volume", "rm", "--force", cm.Name) // kube down keeps a ConfigMap's volume
		}
	})
	t.Logf("podman kube play:\n%s", out)
	const proxy, shop, sink = "shop-pod-0-seckill-proxy", "shop-pod-0-shop", "seckill-sink-pod-0-seckill-sink"
	logs := func(c string) func() string {
		return func() string { out, _ := podman(t, "logs", "--tail", "40", c); return out }
	}

	// The probes' paths, as the kubelet would ask them.
	for port, paths := range play.probes {
		for _, path := range paths {
			c := proxy
			if port == "6382" {
				c = sink
			}
			awaitHTTP(t, "http://127.0.0.1:"+port+path, time.Minute, logs(c))
		}
	}
	if len(play.probes["6381"]) != 3 || len(play.probes["6382"]) != 2 {
		t.Errorf("probes %v, want liveness, readiness and startup on 6381 and liveness and readiness on 6382", play.probes)
	}

	// The application container reaches the proxy on the address its manifest gives it.
	resp := func(cmds string) string {
		return mustPodman(t, "exec", shop, "sh", "-c",
			`printf '`+cmds+`QUIT\r\n' | nc -w 5 "${REDIS_ADDR%:*}" "${REDIS_ADDR#*:}"`)
	}
	if got := resp(`AUTH shop ` + shopPassword + `\r\nPING\r\n`); got != "+OK\r\n+PONG\r\n+OK\r\n" {
		t.Errorf("the application's AUTH and PING through 127.0.0.1:6380: %q", got)
	}
	if got := resp(`PING\r\n`); !strings.HasPrefix(got, "-NOAUTH") {
		t.Errorf("PING without AUTH: %q, want -NOAUTH", got)
	}
	if got := resp(`AUTH shop ` + shopPassword + `\r\nSECKILL.WARM podsku 1\r\n`); !strings.Contains(got, "-NOPERM") {
		t.Errorf("an app user's WARM: %q, want -NOPERM", got)
	}

	// The admin port: the guarded paths need the token, from the application container too.
	wget := func(header string) (string, int) {
		args := []string{"exec", shop, "wget", "-q", "-O-"}
		if header != "" {
			args = append(args, "--header", header)
		}
		return podman(t, append(args, "http://127.0.0.1:6381/debug/pprof/cmdline")...)
	}
	if out, code := wget(""); code == 0 || !strings.Contains(out, "401") {
		t.Errorf("pprof from the application container without the token: exit %d %q, want 401", code, out)
	}
	if out, code := wget("Authorization: Bearer " + token); code != 0 || !strings.Contains(out, "seckill-proxy") {
		t.Errorf("pprof with the token: exit %d %q", code, out)
	}
	if got := status(t, "http://127.0.0.1:6381/metrics", ""); got != 200 {
		t.Errorf("/metrics: %d, want 200 (the scrape needs no token)", got)
	}

	// The proxy and the sink as the manifests' securityContext and resources say.
	for _, c := range []string{proxy, sink} {
		var in []struct {
			State      struct{ Pid int }
			HostConfig struct {
				ReadonlyRootfs bool
				Memory         int64
			}
		}
		if err := json.Unmarshal([]byte(mustPodman(t, "inspect", c)), &in); err != nil || len(in) != 1 {
			t.Fatalf("podman inspect %s: %v", c, err)
		}
		if uid := processUID(t, strconv.Itoa(in[0].State.Pid)); uid != "65532" {
			t.Errorf("%s runs as uid %s, want 65532", c, uid)
		}
		if !in[0].HostConfig.ReadonlyRootfs || in[0].HostConfig.Memory != 256<<20 {
			t.Errorf("%s: read-only root %v, memory limit %d; the manifest says true and 256Mi", c, in[0].HostConfig.ReadonlyRootfs, in[0].HostConfig.Memory)
		}
	}

	sellThrough(t, "127.0.0.1:6380", opsPassword, "pod_"+run, cfg)
}

// redisUser creates (or resets) the Redis user name with password and the proxy's own rule on
// every node of the dev stack's cluster, replicas too; it is deleted when the test ends.
func redisUser(t *testing.T, cfg conf.Config, name, password string) {
	t.Helper()
	ctx := context.Background()
	cc := connect.Redis(cfg.Redis)
	defer cc.Close()
	each := func(f func(c *redis.Client) error) {
		if err := cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return f(c) }); err != nil {
			t.Fatal(err)
		}
	}
	each(func(c *redis.Client) error {
		return c.Do(ctx, "ACL", "SETUSER", name, "reset", "on", ">"+password, "~*", "&*", "+@all").Err()
	})
	t.Cleanup(func() {
		cc := connect.Redis(cfg.Redis)
		defer cc.Close()
		_ = cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
			return c.Do(ctx, "ACL", "DELUSER", name).Err()
		})
	})
}
