package conf

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"sort"
	"sync"
	"syscall"

	"github.com/knadh/koanf/providers/structs"
	"github.com/knadh/koanf/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Changed lists the settings (by path, sorted) whose values differ between a and b.
func Changed(a, b Config) []string {
	ka, kb := koanf.New("."), koanf.New(".")
	_ = ka.Load(structs.Provider(a, "koanf"), nil)
	_ = kb.Load(structs.Provider(b, "koanf"), nil)
	var out []string
	for _, key := range Keys() {
		if !reflect.DeepEqual(ka.Get(key), kb.Get(key)) {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

// Reloader loads a binary's configuration anew, from the same command line, file and
// environment as at start, and hands what may change without a restart to the binary.
type Reloader struct {
	// Reloadable are the settings the binary takes from a reload, besides log.level, which
	// the Reloader sets on the logger itself.
	Reloadable map[string]bool
	// Apply takes a reloaded configuration; it uses only the Reloadable settings.
	Apply func(Config)

	mu      sync.Mutex // one reload at a time
	load    func() (Config, error)
	level   zap.AtomicLevel
	started Config // the configuration the binary started with
	last    Config // the last one loaded
	log     *zap.Logger
}

// Reloader returns the binary's Reloader; Reloadable and Apply are the caller's to set.
func (cl *CommandLine) Reloader(log *zap.Logger) *Reloader {
	return &Reloader{load: cl.reload, level: cl.Level, started: cl.Config, last: cl.Config, log: log}
}

// Reload loads the configuration anew and applies what may change. A configuration that does
// not load or validate changes nothing; a changed setting that takes a restart is logged by
// name and left as it is. It returns the settings it changed.
func (r *Reloader) Reload() ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next, err := r.load()
	if err != nil {
		r.log.Error("reload: the configuration is not valid; nothing changed", zap.Error(err))
		return nil, err
	}
	for _, key := range Changed(r.started, next) {
		if key != "log.level" && !r.Reloadable[key] {
			r.log.Warn("reload: this setting changes only with a restart; it keeps its value", zap.String("setting", key))
		}
	}
	var applied []string
	for _, key := range Changed(r.last, next) {
		if key == "log.level" || r.Reloadable[key] {
			applied = append(applied, key)
		}
	}
	if level, err := zapcore.ParseLevel(next.Log.Level); err == nil { // Validate checked it
		r.level.SetLevel(level)
	}
	if r.Apply != nil {
		r.Apply(next)
	}
	r.last = next
	r.log.Info("reload: configuration applied", zap.Strings("changed", applied))
	return applied, nil
}

// ServeHTTP reloads on a POST (the admin port's /reload): 200 with the settings changed, one
// a line, or 400 with why the configuration did not load.
func (r *Reloader) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST to reload the configuration", http.StatusMethodNotAllowed)
		return
	}
	changed, err := r.Reload()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "reloaded\n")
	for _, key := range changed {
		_, _ = io.WriteString(w, key+"\n")
	}
}

// Admin serves /reload with r and every other path with next.
func (r *Reloader) Admin(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/reload", r)
	mux.Handle("/", next)
	return mux
}

// OnSIGHUP reloads at each SIGHUP until ctx ends.
func (r *Reloader) OnSIGHUP(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_, _ = r.Reload()
			}
		}
	}()
}
