# seckill-proxy. `make run` and `make test` are the README's quick start.
SHELL := /bin/bash
STACK := scripts/devstack.sh
GO_PACKAGES := ./...

.PHONY: run demo bench chaos test vet build image stack-up stack-down stack-status clean

# run: bring up the dev stack, start the sink in the background and the proxy in the
# foreground; Ctrl-C stops both.
run: stack-up build
	eval "$$($(STACK) env)"; \
	./bin/seckill-sink -log.format=console & sink=$$!; \
	trap 'kill $$sink 2>/dev/null; wait $$sink' EXIT; \
	./bin/seckill-proxy -log.format=console

# demo: the seeds' sale end to end with the report and the invariant checks
# (KEEP=1 leaves the proxy and the sink running).
demo:
	scripts/demo.sh

# bench: every comparison of BENCHMARKS.md, measured in one run; rewrites BENCHMARKS.md.
bench:
	scripts/bench.sh

# chaos: every fault of scripts/chaos.sh, three runs each (a master kill ten), during real
# sales; the table goes to RELIABILITY.md.
chaos:
	CHAOS_OUT=RELIABILITY.md CHAOS_RUNS_MASTER_KILL=10 scripts/chaos.sh 3

# test: the dev stack, go vet, then every test with the race detector against real services
# (deploy/ builds the image with podman, installing it on the first run, and sells through it),
# and the proxy's tests once more with every client on a goroutine of its own (no event loop,
# as off Linux), then the short chaos profile (one run each of a proxy kill, a Kafka cut, a
# master paused past the node timeout, a master cut off from the rest of the cluster, a
# proxy paused, a flat-out sale on a busy core (no UNAVAILABLE allowed), a drifted topic, a
# sink started with MySQL down, the kill of a split sale's bucket master, and a proxy kill
# and a master kill of one sale among 1,001 open ones, two proxies on one sale's RATE driven
# flat out by a load process each; three master kills). -p 1: packages share one cluster, and the failover test kills one of its masters.
test: stack-up vet
	eval "$$($(STACK) env)"; SECKILL_REQUIRE_SERVICES=1 go test -race -count=1 -p 1 -timeout 30m $(GO_PACKAGES)
	eval "$$($(STACK) env)"; SECKILL_REQUIRE_SERVICES=1 SECKILL_REDIS_EVENT_LOOPS=0 go test -race -count=1 -timeout 20m ./proxy
	CHAOS_RUNS_MASTER_KILL=3 scripts/chaos.sh 1 proxy-kill kafka-cut master-kill master-pause master-partition proxy-pause overload topic-drift sink-mysql-down bucket-master-kill crowd-proxy-kill crowd-master-kill admission-rush

# vet also builds for macOS, where there is no epoll: the goroutine server must build off Linux.
# staticcheck is go.mod's tool (go tool staticcheck), with no findings allowed; so is gocognit:
# no function of the code (tests aside) above a cognitive complexity of 30.
vet:
	go vet $(GO_PACKAGES)
	GOOS=darwin go vet $(GO_PACKAGES)
	go tool staticcheck $(GO_PACKAGES)
	go tool gocognit -exact-recursion -test=false -over 30 .
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi

build:
	go build -o bin/ ./cmd/...

# image: the Dockerfile's image, built with podman from local stand-ins of its base images
# (installs podman on the first run); IMAGE names it.
image:
	scripts/image.sh build $${IMAGE:-localhost/seckill-proxy:dev}

stack-up:
	$(STACK) up

stack-down:
	$(STACK) down

stack-status:
	$(STACK) status

clean:
	rm -rf bin
