package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"time"

	"seckill-proxy/internal/chaos"
	"seckill-proxy/internal/loadtest"
)

// The fault suite's subcommands: scripts/chaos.sh starts and stops processes; what the
// faults are, when one comes, and what a run's row says are internal/chaos's and loadtest's.

// faultPlan prints the suite's plan, a line per fault: its name, its kind (sale, network or
// own) and its runs; with -list, each fault and what it does.
func faultPlan(fs *flag.FlagSet, args []string) int {
	runs := fs.Int("runs", 3, "runs of each fault, unless CHAOS_RUNS_<FAULT> says otherwise")
	list := fs.Bool("list", false, "list every fault and what it does")
	if fs.Parse(args) != nil {
		return 2
	}
	if *list {
		for _, f := range chaos.Catalogue() {
			fmt.Printf("%-16s %s\n", f.Name, f.Doc)
		}
		return 0
	}
	plan, err := chaos.Plan(fs.Args(), *runs, os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "seckill-bench fault-plan:", err)
		return 2
	}
	for _, s := range plan {
		fmt.Printf("%s %s %d %d %d\n", s.Fault.Name, s.Fault.Kind, s.Runs, s.Fault.SaleBuckets(), s.Fault.Crowd())
	}
	return 0
}

// faultIntro prints the opening of the suite's report, with the table's header.
func faultIntro(fs *flag.FlagSet, args []string) int {
	s := loadtest.Suite{Cores: runtime.NumCPU(), When: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Commit: loadtest.Revision()}
	fs.StringVar(&s.Command, "command", "scripts/chaos.sh", "the suite's command line")
	fs.IntVar(&s.Faults, "faults", 0, "faults run")
	fs.IntVar(&s.Runs, "runs", 0, "runs of each")
	fs.IntVar(&s.Buyers, "buyers", 0, "requests of each sale")
	fs.IntVar(&s.Conns, "conns", 0, "connections of each sale")
	fs.IntVar(&s.Rate, "rate", 0, "requests per second of each sale")
	if fs.Parse(args) != nil {
		return 2
	}
	var set []string
	for _, f := range chaos.Catalogue() {
		if v := os.Getenv(chaos.RunsVar(f.Name)); v != "" {
			set = append(set, chaos.RunsVar(f.Name)+"="+v)
		}
	}
	s.RunsSet = strings.Join(set, " ")
	if s.RunsSet == "" {
		s.RunsSet = "none"
	}
	fmt.Println(loadtest.FaultIntro(s))
	return 0
}

// faultRow prints one run's row of the suite's table: from seckill-bench's report for a fault
// during a sale; from bench-admission.sh's report for admission-rush; from go test's log for
// clock-off. With -delay, it prints instead when to inject a sale's fault, in seconds.
func faultRow(fs *flag.FlagSet, report *string, args []string) int {
	stderr := fs.String("stderr", "", "what seckill-bench wrote on stderr, for a run with no report; for clock-off, go test's log")
	var run loadtest.FaultRun
	fs.StringVar(&run.Fault, "fault", "", "the fault's name")
	fs.IntVar(&run.Run, "run", 0, "the run's number")
	fs.StringVar(&run.Injected, "injected", "", "when the fault was injected, seconds into the sale")
	fs.Int64Var(&run.LastedMs, "lasted", 0, "how long the fault lasted, ms")
	fs.IntVar(&run.ExitCode, "rc", 0, "the run's exit status")
	header := fs.Bool("header", false, "print the table's header instead")
	delay := fs.Bool("delay", false, "print when to inject the fault, in seconds into the sale, instead")
	units := fs.Int("units", 2000, "with -delay: the sale's units")
	rate := fs.Int("rate", 500, "with -delay: requests per second; for admission-rush: the sale's RATE")
	burst := fs.Int("burst", 50, "for admission-rush: the sale's BURST")
	if fs.Parse(args) != nil {
		return 2
	}
	switch {
	case *header:
		fmt.Println(loadtest.FaultHeader)
		return 0
	case *delay:
		fmt.Printf("%.2f\n", chaos.InjectAt(*units, *rate, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))).Seconds())
		return 0
	}
	var rep *loadtest.Report
	if r, err := loadtest.ReadReports(*report); err == nil { // one per load process
		rep = &r
	}
	out, _ := os.ReadFile(*stderr) // none: the row says seckill-bench left nothing on stderr
	switch run.Fault {
	case "admission-rush":
		fmt.Println(loadtest.AdmissionRushRow(run.Run, rep, run.ExitCode, *rate, *burst))
	case "clock-off":
		fmt.Println(loadtest.ClockOffRow(run.Run, string(out), run.ExitCode))
	default:
		var last string
		if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) > 0 {
			last = lines[len(lines)-1]
		}
		fmt.Println(loadtest.FaultRow(run, rep, last))
	}
	return 0
}
