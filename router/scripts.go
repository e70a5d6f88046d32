package router

import (
	"strings"
	"sync"

	"go.uber.org/zap"

	"seckill-proxy/internal/luabound"
)

// An app user's scripts, judged by what they can do. A script that never ends makes its master
// answer BUSY to every client and sale on it, and SCRIPT KILL cannot stop one that wrote; so
// an app user may run a script only if internal/luabound finds that it ends in time bounded by
// its input (its loops walk its arguments or a reply, or count to a literal), or if an admin
// listed its SHA1 in redis.app_scripts ("*": any), or if it is one of the seeds' stock scripts
// (run as a buy). EVALSHA names no text: a SHA1 whose script this proxy judged (by EVAL or
// SCRIPT LOAD) gets that verdict, and one it never saw gets NOSCRIPT, on which clients send
// the text with EVAL. Functions run only with "*".

// noScriptReply makes a client send a script's text (EVAL) in place of its SHA1.
const noScriptReply = "NOSCRIPT No matching script. Please use EVAL."

// maxVerdicts bounds the verdicts kept by SHA1; past it they are forgotten together (a client's
// next EVALSHA then gets NOSCRIPT and sends the text again).
const maxVerdicts = 4096

// verdicts are the scripts this proxy judged, by SHA1: nil for one that may run, else why not.
type verdicts struct {
	mu sync.Mutex
	m  map[string]error
}

func (v *verdicts) get(sha string) (err error, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	err, ok = v.m[sha]
	return err, ok
}

func (v *verdicts) put(sha string, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil || len(v.m) >= maxVerdicts {
		v.m = map[string]error{}
	}
	v.m[sha] = err
}

// appScript says whether an app user may run the script or function that args calls (name
// lower-cased: EVAL[_RO] and SCRIPT LOAD, as "eval", of a text; EVALSHA[_RO] of a SHA1; FCALL):
// nil, or the error to answer.
func (r *Router) appScript(name []byte, args [][]byte) error {
	if r.appScripts["*"] || len(args) < 2 {
		return nil // any; or the arity error is Redis's to give
	}
	switch string(name) {
	case "eval", "eval_ro":
		sha := sha1Hex(string(args[1]))
		if r.appScripts[sha] || r.legacy != nil && r.legacy.byBody(args[1]) != nil {
			return nil
		}
		return r.refuseScript(sha, r.judge(sha, args[1]))
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
		why, ok := r.verdicts.get(sha)
		if !ok {
			return respError(noScriptReply)
		}
		return r.refuseScript(sha, why)
	}
	return respError("NOPERM functions are not ones app users may run: an admin may allow them all with redis.app_scripts: [\"*\"]")
}

// judge is the verdict on body, whose SHA1 is sha: the one kept, or luabound's, kept.
func (r *Router) judge(sha string, body []byte) error {
	why, ok := r.verdicts.get(sha)
	if !ok {
		why = luabound.Check(string(body))
		r.verdicts.put(sha, why)
	}
	return why
}

// judgeAdmin keeps the verdict on the text of an admin's EVAL or SCRIPT LOAD (which runs
// whatever it is), so that an app user's EVALSHA of it gets an answer, not NOSCRIPT.
func (r *Router) judgeAdmin(name []byte, args [][]byte) {
	if len(args) >= 2 && (string(name) == "eval" || string(name) == "eval_ro") && !r.appScripts["*"] {
		r.judge(sha1Hex(string(args[1])), args[1])
	}
}

// refuseScript is the answer to an app user's script sha that luabound judged (why nil: it may
// run), logged at most every few seconds.
func (r *Router) refuseScript(sha string, why error) error {
	if why == nil {
		return nil
	}
	r.scriptLog.Do(func() {
		r.log.Warn("an app user's script was refused: it may not end in time bounded by its input; an admin may list its SHA1 in redis.app_scripts",
			zap.String("sha1", sha), zap.String("why", why.Error()))
	})
	return respError("NOPERM script " + sha + " may not end in time bounded by its input (" + oneLine(why.Error()) +
		"): a script that loops on a value can hold its master, which answers BUSY to every client and sale on it; an admin may allow it by its SHA1 in redis.app_scripts")
}

func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }
