package luabound

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/yuin/gopher-lua/ast"

	"seckill-proxy/internal/luacanon"
)

// The meter: what an app user's script does at run time, charged as it does it. The cost
// model (cost.go) bounds a script's steps from its text, but not what Redis hands it: a GET of
// a 16 MiB value is one step, 249 of them held a master for 16 s, and SRANDMEMBER key -5000000
// is one call that builds a reply of five million elements. So every app user's script that
// calls Redis, or loops, is sent rewritten (Prepare):
//   - every redis.call and redis.pcall goes through a wrapper that charges, before the call,
//     the bytes of its arguments (Redis keeps its own copy of what it writes) and what the
//     command may allocate by its arguments (SETRANGE and SETBIT offsets, BITFIELD's, the
//     counts of SRANDMEMBER, ZRANDMEMBER, HRANDFIELD, SPOP, LPOP, RPOP), against a budget of
//     bytes (Limits.Bytes), and refuses the call that would pass it; after the call, the
//     reply's size in steps, as a fueled loop's steps;
//   - every loop body and function body takes a step, as Fuel's do (fuel.go), whether or not
//     the script needed fuel (a script the model bounds gets more fuel than it can spend);
//   - each step and each call looks at the Lua heap (collectgarbage('count'), some 30 ns), and
//     at Redis's clock (TIME) whenever 4,096 units have been spent or the heap has grown by a
//     MiB since it last looked: past Limits.Time since the script started, or Limits.Bytes of
//     heap above where it started, the script stops with an error.
//
// What runs between two looks is straight-line code, which the model bounds (copies.go). A
// pcall in the script may catch the error; every later step and call raises it again.

// Limits are what an app user's script may spend at run time.
type Limits struct {
	// Fuel is the units a script that loops on a value may spend (0: such a script is
	// refused, as Check refuses it).
	Fuel int
	// Bytes is the bytes a script may hand Redis to keep, and may grow the Lua heap by; 0
	// leaves a script unmetered (as Fuel alone rewrites it).
	Bytes int
	// TimeMillis is the time a script may run, read from Redis's clock at each look.
	TimeMillis int
}

// Prepared is the verdict on a script that may run: the text to send in its place (the
// script itself when nothing needs counting), and what a call of it may cost for its input.
type Prepared struct {
	Text      string
	Bound     Bound
	Rewritten bool
}

// MeterError is the start of the error a metered script raises when it passes a limit.
const MeterError = "ERR script stopped by seckill-proxy:"

// checkEvery is how many units may pass between two looks at Redis's clock.
const checkEvery = 4096

// unmetered is the fuel a script the model bounds is given: more than any bound allows.
const unmetered = 1 << 50

// Prepare judges src for an app user and makes the text to send: metered (and fueled, if it
// loops on a value) when lim.Bytes > 0, only fueled when it must be and lim.Bytes is 0. A
// script that calls Redis nowhere and never loops is sent as it is.
func Prepare(src string, lim Limits) (Prepared, error) {
	bound, err := Analyse(src)
	if lim.Bytes <= 0 {
		if err == nil {
			return Prepared{Text: src, Bound: bound}, nil
		}
		if lim.Fuel <= 0 || errors.Is(err, ErrTooComplex) || errors.Is(err, ErrOutOfTime) {
			return Prepared{}, err
		}
		text, b, err := Fuel(src, lim.Fuel)
		return Prepared{Text: text, Bound: b, Rewritten: true}, err
	}
	fuel := unmetered
	switch {
	case err == nil:
	case lim.Fuel <= 0 || errors.Is(err, ErrTooComplex) || errors.Is(err, ErrOutOfTime):
		return Prepared{}, err
	default:
		fuel = lim.Fuel
	}
	text, b, err := rewrite(src, fuel, &lim)
	if err != nil {
		return Prepared{}, err
	}
	if fuel == unmetered {
		b = bound // the model's bound: the steps the meter adds cost no more than it allows
	}
	return Prepared{Text: text, Bound: b, Rewritten: text != src}, nil
}

// Fuel returns src rewritten to stop once its bodies have cost units, with what the script
// may cost in all, or why it cannot be: it does not parse, or does something no fuel bounds.
func Fuel(src string, units int) (string, Bound, error) {
	if units <= 0 {
		return "", Bound{}, fmt.Errorf("loop fuel is off")
	}
	return rewrite(src, units, nil)
}

// rewrite is Fuel's and the meter's one rewrite: a step in every body, weighed by the cost
// model, from units; with lim, Redis's functions wrapped and the limits' looks.
func rewrite(src string, units int, lim *Limits) (string, Bound, error) {
	chunk, f, tokens, err := check(src, true)
	if err != nil {
		return "", Bound{}, err
	}
	fuel := units
	if units == unmetered {
		fuel = 1 // the weights of the bodies, which do not depend on the fuel; the bound is Analyse's
	}
	w, bound, err := costOf(chunk, f, fuel, tokens)
	if err != nil {
		return "", Bound{}, err
	}
	header, body := "", src
	if strings.HasPrefix(src, "#!") { // the shebang line stays the first
		i := strings.IndexByte(src, '\n')
		if i < 0 {
			return src, bound, nil // flags and no code
		}
		header, body = src[:i+1], src[i+1:]
	}
	edits, err := editsOf(body, lim != nil)
	if err != nil {
		return "", Bound{}, err
	}
	steps := 0
	for _, e := range edits {
		if e.step {
			steps++
		}
	}
	if steps != len(w.order) {
		return "", Bound{}, fmt.Errorf("the fuel found %d loop and function bodies in the text and %d in the tree", steps, len(w.order))
	}
	if lim != nil && steps == 0 && !hasCalls(edits) {
		return src, bound, nil // nothing to count
	}
	weights := make([]int, len(w.order))
	for i, fr := range w.order {
		weights[i] = max(1, int(min(float64(Budget), fr.weight.constant())+0.999))
	}
	var b strings.Builder
	b.WriteString(header)
	prologue, statements := fuelHeader(units, lim)
	b.WriteString(prologue)
	last, step := 0, 0
	for _, e := range edits {
		b.WriteString(body[last:e.at])
		switch {
		case e.step:
			b.WriteString(" " + fuelCounter + "=" + fuelCounter + "-" + strconv.Itoa(weights[step]) + " ")
			if lim != nil {
				b.WriteString(meterStep + "() ")
			} else {
				b.WriteString("if " + fuelCounter + "<0 then " + fuelError + "(" + fuelStop + ") end ")
			}
			step++
			last = e.at
		default:
			b.WriteString(e.with)
			last = e.end
		}
		if b.Len() > MaxFueled {
			return "", Bound{}, fmt.Errorf("the script has %d loops and functions: rewritten, it would be over %d bytes", steps, MaxFueled)
		}
	}
	b.WriteString(body[last:])
	out := b.String()
	if err := counted(out, weights, statements, lim != nil); err != nil {
		return "", Bound{}, err
	}
	return out, bound, nil
}

// edit is one change to a script's body: a step after offset at, or the text from at to end
// replaced with with.
type edit struct {
	at, end int
	step    bool
	with    string
}

// wrapped are the functions the meter sends through its own: Redis's, for their arguments and
// replies.
var wrapped = map[string]string{"call": meterCall, "pcall": meterPCall}

// editsOf are body's edits in the text's order: a step after each do and repeat and after a
// function's parameter list; with meter, each redis.call and redis.pcall (called or named)
// replaced by the meter's wrappers. A script that names the rewrite's names, or reaches
// Redis's functions any other way than by name (redis[k], a copy of the table redis), is
// refused: the wrapper could be gone round.
func editsOf(body string, meter bool) ([]edit, error) {
	toks, err := luacanon.Tokens(body)
	if err != nil {
		return nil, fmt.Errorf("the script does not parse: %v", err)
	}
	var out []edit
	for i, t := range toks {
		switch {
		case !t.Keyword && strings.HasPrefix(t.Text, FuelPrefix):
			return nil, fmt.Errorf("the script names %s, a name the proxy's rewrite uses", t.Text)
		case t.Keyword && (t.Text == "do" || t.Text == "repeat"):
			out = append(out, edit{at: t.End, step: true})
		case t.Keyword && t.Text == "function":
			for j := i + 1; j < len(toks); j++ {
				if !toks[j].Keyword && toks[j].Text == ")" {
					out = append(out, edit{at: toks[j].End, step: true})
					break
				}
			}
		case meter && !t.Keyword && t.Text == "redis" && !(i > 0 && (toks[i-1].Text == "." || toks[i-1].Text == ":")):
			if i+2 >= len(toks) || toks[i+1].Text != "." || !isName(toks[i+2]) {
				return nil, errors.New("the script reaches redis other than by a function's name (redis.call): the proxy could not count its calls")
			}
			if with, ok := wrapped[toks[i+2].Text]; ok {
				out = append(out, edit{at: t.End - len(t.Text), end: toks[i+2].End, with: with})
			}
		}
	}
	return out, nil
}

func isName(t luacanon.Token) bool {
	if t.Keyword || t.Text == "" {
		return false
	}
	c := t.Text[0]
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func hasCalls(edits []edit) bool {
	for _, e := range edits {
		if !e.step {
			return true
		}
	}
	return false
}

// The rewrite's own names (FuelPrefix starts each; a script that names one is refused).
const (
	meterStep  = FuelPrefix + "step"
	meterCall  = FuelPrefix + "call"
	meterPCall = FuelPrefix + "pcall"
)

// fuelHeader is the text put before a rewritten script's first line (no line break: the
// script's lines keep their numbers), and how many statements it makes.
func fuelHeader(units int, lim *Limits) (string, int) {
	limit := strconv.Itoa(units)
	fuel := "local " + fuelCounter + "," + fuelError + "," + fuelStop + "=" + limit + ",error,{err='" +
		FuelError + " " + limit + " units (redis.app_script_fuel): it loops on a value, which could hold its master'} "
	if lim == nil {
		return fuel, 1
	}
	return fuel + strings.NewReplacer("FUEL", fuelCounter, "ERROR", fuelError, "STOP", fuelStop,
		"STEP", meterStep, "CALL", meterCall, "PCALL", meterPCall, "EVERY", strconv.Itoa(checkEvery),
		"BYTES", strconv.Itoa(lim.Bytes), "KIB", strconv.Itoa(max(1, lim.Bytes/1024)), "MILLIS", strconv.Itoa(max(1, lim.TimeMillis)),
		"UNMETERED", strconv.Itoa(unmetered), "MSG", MeterError).Replace(meterLua), 3
}

// meterLua is the meter, in one line of three statements: the wrappers' names, and the block
// that makes them. Its locals are the block's, so the script keeps its 200 locals but 5.
const meterLua = `local STEP,CALL,PCALL ` +
	`do local rcall,rpcall,gc,typ,nxt,tonum,lower,sub,sel,abs,mx=redis.call,redis.pcall,collectgarbage,type,next,tonumber,string.lower,string.sub,select,math.abs,math.max ` +
	`local left,heap0,mark,hmark,hlow=BYTES,gc('count'),FUEL-EVERY,0,0 hmark,hlow=heap0+1024,heap0-1024 ` +
	`local t0=rcall('TIME') local ms0=tonum(t0[1])*1000+tonum(t0[2])/1000 ` +
	`local function stop(why) ERROR({err='MSG '..why}) end ` +
	`local function look(h) if FUEL<0 then ERROR(STOP) end ` +
	`if h-heap0>KIB then stop('its Lua heap grew past BYTES bytes (redis.app_script_bytes)') end ` +
	`local t=rcall('TIME') if tonum(t[1])*1000+tonum(t[2])/1000-ms0>MILLIS then stop('it ran past MILLIS ms (redis.app_script_time)') end ` +
	`mark,hmark,hlow=FUEL-EVERY,h+1024,h-1024 end ` +
	`STEP=function() local h=gc('count') if FUEL<mark or h>hmark then look(h) elseif h<hlow then hmark,hlow=h+1024,h-1024 end end ` +
	`local function size(r,d) local t=typ(r) if t=='string' then return #r+16 end if t~='table' or d>32 then return 16 end local n=16 for _,v in nxt,r do n=n+size(v,d+1) end return n end ` +
	`local function num(v) return abs(tonum(v) or 0) end ` +
	`local function alloc(c,k,a,b,...) if typ(c)~='string' then return 0 end c=lower(c) ` +
	`if c=='setrange' then return num(a)+#(typ(b)=='string' and b or '') end if c=='setbit' then return num(a)/8 end ` +
	`if c=='srandmember' or c=='zrandmember' or c=='hrandfield' or c=='spop' or c=='lpop' or c=='rpop' then return num(a)*32 end ` +
	`if c=='bitfield' then local most,t=0,{a,b,...} for i=1,sel('#',a,b,...) do local v=t[i] if typ(v)=='string' and sub(v,1,1)=='#' then most=mx(most,num(sub(v,2))*8) else most=mx(most,num(v)/8) end end return most end return 0 end ` +
	`local function spend(...) local n,t=alloc(...),{...} for i=1,sel('#',...) do local v=t[i] if typ(v)=='string' then n=n+#v end end left=left-n ` +
	`if left<0 then stop('its Redis calls asked for more than BYTES bytes (redis.app_script_bytes)') end end ` +
	`local function after(r) FUEL=FUEL-32-size(r,0)/8 STEP() return r end ` +
	`CALL=function(...) STEP() spend(...) return after(rcall(...)) end ` +
	`PCALL=function(...) STEP() spend(...) return after(rpcall(...)) end end `

// counted checks a rewritten script's tree, whatever the lexer that placed the steps got
// wrong: past the header's statements, every loop body and function body must start by
// taking from the counter, in the text's order, at least the weight the cost model gave it;
// metered, nothing may name redis.call or redis.pcall but the header.
func counted(src string, weights []int, header int, meter bool) error {
	chunk, err := parseScript(src, "the rewritten script")
	if err != nil {
		return err
	}
	if len(chunk) < header {
		return fmt.Errorf("the rewritten script has %d statements, fewer than its header's %d", len(chunk), header)
	}
	w := &stepWalk{meter: meter}
	w.stmts(chunk[header:])
	if w.err != nil {
		return w.err
	}
	if len(w.taken) != len(weights) {
		return fmt.Errorf("the rewritten script takes steps in %d bodies, not %d", len(w.taken), len(weights))
	}
	for i, n := range w.taken {
		if n < weights[i] {
			return fmt.Errorf("the rewritten script's body %d takes %d units for a weight of %d", i+1, n, weights[i])
		}
	}
	return nil
}

// redisFunction: e is redis.call or redis.pcall, which a metered script may not name.
func redisFunction(e *ast.AttrGetExpr) bool {
	id, ok := e.Object.(*ast.IdentExpr)
	key, ok2 := e.Key.(*ast.StringExpr)
	return ok && ok2 && id.Value == "redis" && (key.Value == "call" || key.Value == "pcall")
}
