package router

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"go.uber.org/zap"

	"seckill-proxy/internal/luabound"
)

// An app user's scripts, judged by what they can cost. A script that runs long makes its master
// answer BUSY to every client and sale on it, SCRIPT KILL cannot stop one that wrote, and one
// stuck in a C library call (a backtracking pattern) is not even told BUSY; so an app user may
// run a script only if internal/luabound's cost model bounds it within luabound.Budget units
// plus luabound.PerInputByte for each byte of each call's input (checked per call, on the
// call's own keys and arguments), or if an admin listed its SHA1 in redis.app_scripts ("*":
// any), or if it is one of the seeds' stock scripts (run as a buy). A script refused only for
// how it loops (a while, a for to a value, recursion) runs fueled, when redis.app_script_fuel is
// above 0: rewritten to stop after that many units, each body charged what it costs. Every
// script an app user runs is metered as it runs (luabound.Prepare, meter.go): what it asks
// Redis to keep and to allocate, its Lua heap and its time, within redis.app_script_bytes and
// redis.app_script_time. The client never sees the rewrite: its
// EVAL sends the rewritten text, its EVALSHA the rewritten SHA1, its SCRIPT LOAD loads the
// rewritten text and answers the client's SHA1, its SCRIPT EXISTS asks for the rewritten SHA1. EVALSHA
// names no text: a SHA1 whose script this proxy judged (by EVAL or SCRIPT LOAD) gets that
// verdict, and one it never saw gets NOSCRIPT, on which clients send the text with EVAL.
// Functions run only with "*".

// noScriptReply makes a client send a script's text (EVAL) in place of its SHA1.
const noScriptReply = "NOSCRIPT No matching script. Please use EVAL."

// maxVerdicts bounds the verdicts kept by SHA1, and maxTextBytes the rewritten texts they keep;
// past either the least recently used are forgotten, one at a time (a client's next EVALSHA
// of one then gets NOSCRIPT and sends the text again), so that a flood of new scripts does not
// wipe out the ones in use.
const (
	maxVerdicts  = 4096
	maxTextBytes = 64 << 20
)

// verdict is what this proxy decided of a script: why it may not run as it is (nil: it may),
// and, for one sent rewritten, the text sent and that text's SHA1; what a call of it may
// cost (each call's input is checked against it).
type verdict struct {
	why     error
	text    []byte
	textSHA []byte
	bound   luabound.Bound
}

// verdicts are the scripts this proxy judged, by SHA1, least recently used first out; judging
// is one script at a time (a parse's tree is some 100 bytes a token: at most a few MiB live).
// The zero value is empty and ready.
type verdicts struct {
	mu      sync.Mutex
	lru     *simplelru.LRU[string, verdict]
	bytes   int // of the rewritten texts kept
	judging sync.Mutex
}

func (v *verdicts) get(sha string) (verdict, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.lru == nil {
		return verdict{}, false
	}
	return v.lru.Get(sha)
}

func (v *verdicts) put(sha string, d verdict) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.lru == nil {
		v.lru, _ = simplelru.NewLRU(maxVerdicts, func(_ string, old verdict) { v.bytes -= len(old.text) })
	}
	v.lru.Add(sha, d)
	v.bytes += len(d.text)
	for v.bytes > maxTextBytes && v.lru.Len() > 1 {
		v.lru.RemoveOldest()
	}
}

// rewrite is what the proxy sends in place of a command's argument (an app user's script made
// fueled), and the reply's replacement when Redis answers with a bulk string (SCRIPT LOAD's
// SHA1: the client's own).
type rewrite struct {
	arg    int
	value  []byte
	answer []byte
}

// apply returns args with the rewrite made, in a new slice (args point into a read buffer
// that a server may forward as it is).
func (w *rewrite) apply(args [][]byte) [][]byte {
	out := append([][]byte(nil), args...)
	out[w.arg] = w.value
	return out
}

// appScript says whether an app user may run the script or function that args calls (name
// lower-cased: EVAL[_RO] and SCRIPT LOAD, as "eval", of a text; EVALSHA[_RO] of a SHA1; FCALL):
// nil, or the error to answer. A script that runs rewritten sets s.rewrite, argument 1 of args
// (of SCRIPT LOAD: first the argument after LOAD) to be replaced; at is where args[1] is in
// the command.
func (r *Router) appScript(s *Session, name []byte, args [][]byte, at int) error {
	if r.appScripts["*"] || len(args) < 2 {
		return nil // any; or the arity error is Redis's to give
	}
	switch string(name) {
	case "eval", "eval_ro":
		if len(args[1]) > luabound.MaxSource { // refused before it is hashed or read
			return respError("NOPERM the script is over " + strconv.Itoa(luabound.MaxSource) + " bytes, the most an app user's script may be")
		}
		sha := sha1Hex(string(args[1]))
		if r.appScripts[sha] || r.legacy != nil && r.legacy.byBody(args[1]) != nil {
			return nil
		}
		d := r.judge(s, sha, args[1])
		if d.text != nil {
			s.rewrite = &rewrite{arg: at, value: d.text}
			return r.callAllowed(sha, d, args)
		}
		if err := r.refuseScript(sha, d.why); err != nil {
			return err
		}
		return r.callAllowed(sha, d, args)
	case "evalsha", "evalsha_ro":
		sha := strings.ToLower(string(args[1]))
		if r.appScripts[sha] {
			return nil
		}
		if r.legacy != nil {
			if ls, _ := r.legacy.bySHAOf(sha); ls != nil {
				return nil
			}
		}
		d, ok := r.verdicts.get(sha)
		switch {
		case !ok:
			return respError(noScriptReply)
		case d.text != nil:
			s.rewrite = &rewrite{arg: at, value: d.textSHA}
			return r.callAllowed(sha, d, args)
		}
		if err := r.refuseScript(sha, d.why); err != nil {
			return err
		}
		return r.callAllowed(sha, d, args)
	}
	return respError("NOPERM functions are not ones app users may run: an admin may allow them all with redis.app_scripts: [\"*\"]")
}

// scriptLoad says whether an app user may SCRIPT LOAD args[2]: a rewritten one loads the
// rewritten text, and its answer is the client's SHA1.
func (r *Router) scriptLoad(s *Session, args [][]byte) error {
	err := r.appScript(s, []byte("eval"), args[1:], 2)
	if err == nil && s.rewrite != nil {
		s.rewrite.answer = []byte(sha1Hex(string(args[2])))
	}
	return err
}

// scriptExists asks, for an app user, of the rewritten script in place of each SHA1 that runs
// rewritten (SCRIPT EXISTS is answered per argument, so only one may be rewritten this way: the
// first; a client asks of one script at a time, as Redisson and go-redis do).
func (r *Router) scriptExists(s *Session, args [][]byte) {
	if r.appScripts["*"] {
		return
	}
	for i := 2; i < len(args); i++ {
		if d, ok := r.verdicts.get(strings.ToLower(string(args[i]))); ok && d.text != nil {
			s.rewrite = &rewrite{arg: i, value: d.textSHA}
			return
		}
	}
}

// judge is the verdict on body, whose SHA1 is sha: the one kept, or luabound's, kept (but for
// a judgement that ran out of time, which the next call tries again). s, if not nil, is the
// connection that asks: one that has spent its share of judging time is refused
// (judgeTime), so that no client keeps the judge, which is one for the whole proxy, to itself.
func (r *Router) judge(s *Session, sha string, body []byte) verdict {
	d, ok := r.verdicts.get(sha)
	if ok {
		return d
	}
	if s != nil {
		if err := s.judging.allowed(time.Now()); err != nil {
			return verdict{why: err}
		}
	}
	r.verdicts.judging.Lock()
	defer r.verdicts.judging.Unlock()
	if d, ok := r.verdicts.get(sha); ok { // judged while this one waited
		return d
	}
	start := time.Now()
	p, err := luabound.Prepare(string(body), luabound.Limits{Fuel: r.opt.AppScriptFuel, Bytes: r.opt.AppScriptBytes, TimeMillis: int(r.opt.AppScriptTime / time.Millisecond)})
	d.bound, d.why = p.Bound, err
	if err == nil && p.Rewritten {
		d.text, d.textSHA = []byte(p.Text), []byte(sha1Hex(p.Text))
	}
	if s != nil {
		s.judging.spent(start, time.Since(start))
	}
	if !errors.Is(d.why, luabound.ErrOutOfTime) {
		r.verdicts.put(sha, d)
	}
	return d
}

// unjudged says whether args is an app user's script whose text this proxy has not judged
// yet (EVAL, EVAL_RO, SCRIPT LOAD): an event loop leaves it to Serve, which judges it on a
// goroutine of its own.
func (r *Router) unjudged(s *Session, args [][]byte) bool {
	if len(args) < 2 || r.appScripts["*"] || r.opt.Upstream == nil || !r.opt.Upstream.Restricted() {
		return false // nothing is judged: every script runs, or none
	}
	body := args[1]
	switch {
	case len(args[0]) == 4 && strings.EqualFold(string(args[0]), "eval"),
		len(args[0]) == 7 && strings.EqualFold(string(args[0]), "eval_ro"):
	case len(args) == 3 && strings.EqualFold(string(args[0]), "script") && strings.EqualFold(string(args[1]), "load"):
		body = args[2]
	default:
		return false
	}
	if len(body) > luabound.MaxSource {
		return false // refused unread
	}
	_, ok := r.verdicts.get(sha1Hex(string(body)))
	return !ok
}

// judgeShare is the judging time a connection may spend in any judgeWindow: a client that sends
// new script after new script waits for its share to come back, as no other client does.
const (
	judgeShare  = time.Second
	judgeWindow = 10 * time.Second
)

// judgeTime is a connection's judging time in the current window.
type judgeTime struct {
	from time.Time
	used time.Duration
}

// allowed returns nil if the connection may have a script judged now, or the error to answer.
func (j *judgeTime) allowed(now time.Time) error {
	if now.Sub(j.from) >= judgeWindow {
		j.from, j.used = now, 0
	}
	if j.used < judgeShare {
		return nil
	}
	wait := j.from.Add(judgeWindow).Sub(now)
	return fmt.Errorf("%w: this connection spent %v judging new scripts in %v, its share: send the script again in %d ms (a script judged once is not judged again)",
		errJudgeShare, j.used.Round(time.Millisecond), judgeWindow, wait.Milliseconds())
}

// errJudgeShare is in the answer to a connection past its share of judging time.
var errJudgeShare = errors.New("not judged now")

func (j *judgeTime) spent(at time.Time, d time.Duration) {
	if at.Sub(j.from) >= judgeWindow {
		j.from, j.used = at, 0
	}
	j.used += d
}

// judgeAdmin keeps the verdict on the text of an admin's EVAL or SCRIPT LOAD (which runs
// whatever it is), so that an app user's EVALSHA of it gets an answer, not NOSCRIPT.
func (r *Router) judgeAdmin(s *Session, name []byte, args [][]byte) {
	if len(args) >= 2 && (string(name) == "eval" || string(name) == "eval_ro") && !r.appScripts["*"] && len(args[1]) <= luabound.MaxSource {
		r.judge(s, sha1Hex(string(args[1])), args[1]) // past its share, nothing is kept: the script runs all the same
	}
}

// callAllowed says whether a call of the script sha (args: EVAL[SHA] script numkeys key...
// arg...) stays within what its input allows it to cost (luabound.Bound.Allows); a call whose
// numkeys Redis would refuse is left for Redis to answer.
func (r *Router) callAllowed(sha string, d verdict, args [][]byte) error {
	if len(args) < 3 {
		return nil
	}
	n, err := strconv.Atoi(string(args[2]))
	if err != nil || n < 0 || n > len(args)-3 {
		return nil
	}
	if err := d.bound.Allows(args[3:3+n], args[3+n:]); err != nil {
		return respError("NOPERM script " + sha + " may cost more than this call's input allows (" + err.Error() +
			"): a script that runs long holds its master, which answers BUSY to every client and sale on it; an admin may allow it by its SHA1 in redis.app_scripts")
	}
	return nil
}

// refuseScript is the answer to an app user's script sha that luabound judged (why nil: it may
// run), logged at most every few seconds.
func (r *Router) refuseScript(sha string, why error) error {
	if why == nil {
		return nil
	}
	if errors.Is(why, errJudgeShare) || errors.Is(why, luabound.ErrOutOfTime) {
		return respError("TRYAGAIN script " + sha + " was not judged: " + oneLine(why.Error()))
	}
	r.scriptLog.Do(func() {
		r.log.Warn("an app user's script was refused: its cost model finds no bound within the budget; an admin may list its SHA1 in redis.app_scripts",
			zap.String("sha1", sha), zap.String("why", why.Error()))
	})
	return respError("NOPERM script " + sha + " has no bound within the cost budget (" + oneLine(why.Error()) +
		"): a script that runs long can hold its master, which answers BUSY to every client and sale on it; an admin may allow it by its SHA1 in redis.app_scripts")
}

func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }
