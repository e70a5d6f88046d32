package conf

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// CommandLine is what a binary's command line asked for, with the configuration it loaded.
type CommandLine struct {
	Config Config
	// Migrate asks the binary to apply the MySQL migrations and exit.
	Migrate bool
	// PrintRedisACL asks the proxy to print the Redis ACL rule of its pass-through user and
	// exit.
	PrintRedisACL bool
	// Level is the logger's level, which a reload changes (set by Main).
	Level zap.AtomicLevel
	// reload loads the configuration anew from the same command line and environment.
	reload func() (Config, error)
	// Done is set when the command line was fully served here (-check-config, -print-config,
	// -print-defaults): the binary should exit 0.
	Done bool
}

// ParseCommandLine binds the configuration flags plus -check-config (and -strict), -print-config,
// -print-defaults and -migrate on a new flag set named name, parses args (without the program
// name), loads the Config from its layers and validates it. -check-config and the print
// flags write to out and set Done.
func ParseCommandLine(name string, args, environ []string, out io.Writer) (*CommandLine, error) {
	fs, f := commandFlags(name, out)
	check, print, printDefaults, migrate, printACL := f.check, f.print, f.printDefaults, f.migrate, f.printACL
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%s: unexpected argument %q", name, fs.Arg(0))
	}
	if *f.strict && !*check {
		return nil, fmt.Errorf("%s: -strict goes with -check-config (it makes a warning refuse the configuration)", name)
	}
	if *printDefaults {
		return &CommandLine{Done: true}, writeYAML(out, Default())
	}
	cfg, err := Load(fs, environ)
	if err != nil {
		return nil, err
	}
	if *print {
		if err := writeYAML(out, cfg.Masked()); err != nil {
			return nil, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := refuseUnsafe(cfg); err != nil {
		return nil, err
	}
	if *check {
		if err := checkWarnings(cfg, *f.strict, out); err != nil {
			return nil, err
		}
		_, err = fmt.Fprintln(out, "config OK")
	}
	reload := func() (Config, error) {
		fs, _ := commandFlags(name, io.Discard)
		if err := fs.Parse(args); err != nil {
			return Config{}, err
		}
		cfg, err := Load(fs, environ)
		if err != nil {
			return Config{}, err
		}
		if err := cfg.Validate(); err != nil {
			return Config{}, err
		}
		return cfg, refuseUnsafe(cfg)
	}
	return &CommandLine{Config: cfg, Migrate: *migrate, PrintRedisACL: *printACL, Done: *check || *print,
		Level: zap.NewAtomicLevelAt(zapcore.InfoLevel), reload: reload}, err
}

// ErrWarned is the error of a configuration that -check-config -strict refuses for its
// warnings.
var ErrWarned = errors.New("configuration refused for its warnings (-strict)")

// checkWarnings prints cfg's warnings to out; with strict, any is ErrWarned.
func checkWarnings(cfg Config, strict bool, out io.Writer) error {
	w := cfg.Warnings()
	for _, s := range w {
		if _, err := fmt.Fprintln(out, "warning: "+s); err != nil {
			return err
		}
	}
	if strict && len(w) > 0 {
		return fmt.Errorf("%w: %d warning(s)", ErrWarned, len(w))
	}
	return nil
}

// ErrUnsafe is the error of a configuration that Config.Unsafe refuses.
var ErrUnsafe = errors.New("unsafe configuration refused")

// refuseUnsafe is ErrUnsafe with every finding of cfg.Unsafe, or nil.
func refuseUnsafe(cfg Config) error {
	u := cfg.Unsafe()
	if len(u) == 0 {
		return nil
	}
	return fmt.Errorf("%w:\n  %s", ErrUnsafe, strings.Join(u, "\n  "))
}

// cliFlags are the command line's flags besides the settings.
type cliFlags struct{ check, strict, print, printDefaults, migrate, printACL *bool }

// commandFlags is the flag set of a binary named name: the settings and the cliFlags.
func commandFlags(name string, out io.Writer) (*flag.FlagSet, cliFlags) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	BindFlags(fs)
	return fs, cliFlags{
		check:         fs.Bool("check-config", false, "validate the configuration and exit"),
		strict:        fs.Bool("strict", false, "with -check-config: exit 2 on any warning too"),
		print:         fs.Bool("print-config", false, "print the effective configuration (secrets masked) and exit"),
		printDefaults: fs.Bool("print-defaults", false, "print the default configuration and exit"),
		migrate:       fs.Bool("migrate", false, "apply the MySQL migrations and exit"),
		printACL:      fs.Bool("print-redis-acl", false, "print the Redis ACL rule of the pass-through user (redis.passthrough_username) and exit"),
	}
}

func writeYAML(out io.Writer, c Config) error {
	b, err := c.YAML()
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}

// NewLogger builds the zap logger that l describes: JSON lines by default, or a console
// format for people. The caller owns it and should Sync it on exit.
func (l Log) NewLogger() (*zap.Logger, error) {
	log, _, err := l.newLogger()
	return log, err
}

// newLogger is NewLogger, with the level a reload may change.
func (l Log) newLogger() (*zap.Logger, zap.AtomicLevel, error) {
	level, err := zapcore.ParseLevel(l.Level)
	if err != nil {
		return nil, zap.AtomicLevel{}, &FieldError{Field: "log.level", Value: l.Level, Reason: err.Error()}
	}
	zc := zap.NewProductionConfig()
	if l.Format == LogConsole {
		zc = zap.NewDevelopmentConfig()
	}
	zc.Level = zap.NewAtomicLevelAt(level)
	log, err := zc.Build()
	return log, zc.Level, err
}

// Main is a binary's whole main: it parses the command line (exit 2 on a bad one, 0 once
// -check-config or a print flag is served), builds the logger, calls run, and exits 1 if run
// fails, after logging why.
func Main(name string, run func(*CommandLine, *zap.Logger) error) {
	cl, err := ParseCommandLine(name, os.Args[1:], os.Environ(), os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if cl.Done {
		return
	}
	log, level, err := cl.Config.Log.newLogger()
	cl.Level = level
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	setMemoryLimit(log)
	zap.ReplaceGlobals(log) // for what logs with no logger handed in: TLS files read again (internal/tlsfiles)
	if err := run(cl, log); err != nil {
		log.Error(name+" stopped", zap.Error(err))
		_ = log.Sync()
		os.Exit(1)
	}
	_ = log.Sync()
}
