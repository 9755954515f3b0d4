# statecast — the two commands: `make demo` and `make test`.
GO      ?= go
RUN     := $(CURDIR)/.run
ENVFILE := $(RUN)/env
# Integration tests read STATECAST_PG_DSN and STATECAST_KAFKA_BROKERS from $(ENVFILE).
TESTFLAGS ?= -race -count=1 -timeout 60m

# The repository's Go modules. The root module holds the libraries, daemons and commands;
# deploy/ (its tests load Kubernetes manifests with kustomize, the compose project with
# compose-go, images with go-containerregistry) and cacheclient/e2e/ (a browser test with
# chromedp) are modules of their own, so that a service embedding cacheclient does not get
# those in its module graph. go test ./... in the root does not enter them: the targets
# below run each module in turn (and go on past a failing one, to fail at the end).
MODULES := . deploy cacheclient/e2e
# in_modules runs the shell command $(1) in each module's directory.
in_modules = rc=0; for m in $(MODULES); do echo "== $$m"; (cd $$m && $(1)) || rc=1; done; exit $$rc

# What make images stamps: a semantic version from the nearest v* tag (v0.0.0-dev before
# the first), the commit, and the commit's time as the images' creation time.
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
CREATED ?= $(shell git log -1 --format=%cI 2>/dev/null)

.PHONY: test demo infra infra-cluster down-cluster chaos-cluster down deps tools unit vet lint java bench fuzz fuzz-smoke chaos difftest proto proto-check images

## test: start PostgreSQL and Kafka (idempotent), install tools, run every fuzz target
## briefly (fuzz-smoke), then the whole suite (every module) with -race.
test: deps tools proto-check infra vet lint java fuzz-smoke
	set -a; . $(ENVFILE); set +a; $(call in_modules,$(GO) test $(TESTFLAGS) ./...)

## demo: run the main job on embedded defaults (seeded PostgreSQL, in-process Kafka).
demo: deps
	@mkdir -p $(RUN)
	deploy/local/postgres.sh start > $(RUN)/pg.env
	$(GO) build -o $(RUN)/bin/ ./cmd/cachectl ./cmd/cachectl-dev
	set -a; . $(RUN)/pg.env; set +a; $(RUN)/bin/cachectl dev

deps:
	$(call in_modules,$(GO) mod download)

## tools: what the model check needs (spin) and the status pages' browser test (chromium),
## from Debian.
tools:
	@command -v spin >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq spin >/dev/null; }
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

infra:
	@mkdir -p $(RUN)
	deploy/local/up.sh > $(ENVFILE).tmp && mv $(ENVFILE).tmp $(ENVFILE)
	@cat $(ENVFILE)

down:
	deploy/local/down.sh

## infra-cluster: a KRaft cluster of KAFKA_NODES (default 3) Kafka nodes beside infra's broker
## (deploy/local/kafka-cluster.sh: its own ports and state in .run/kafka-cluster); its
## addresses in .run/cluster.env. down-cluster stops it (its data stays).
KAFKA_NODES ?= 3
infra-cluster:
	@mkdir -p $(RUN)
	STATECAST_KAFKA_NODES=$(KAFKA_NODES) deploy/local/kafka-cluster.sh start > $(RUN)/cluster.env.tmp && mv $(RUN)/cluster.env.tmp $(RUN)/cluster.env
	@cat $(RUN)/cluster.env

down-cluster:
	deploy/local/kafka-cluster.sh stop

vet:
	$(call in_modules,$(GO) vet ./...)

## lint: staticcheck, pinned in tools/go.mod and built into .run/bin (dead code, deprecated calls).
lint:
	@mkdir -p $(RUN)/bin
	cd tools && GOWORK=off GOFLAGS= $(GO) build -o $(RUN)/bin/ honnef.co/go/tools/cmd/staticcheck
	$(call in_modules,$(RUN)/bin/staticcheck ./...)

## java: build and test the Java client (clients/java: the client and its Micrometer module) with Maven, its dependencies kept in
## Maven's local repository between runs; the conformance suite (./conformance) runs its
## driver from this build. Without java or mvn it says so and skips, under CI it fails.
java:
	@if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then \
		if [ "$$CI" = true ]; then echo "java: java and mvn are required (CI=true): install Java 17 and Maven" >&2; exit 1; fi; \
		echo "java: java or mvn not found: the Java client is not built or tested (install Java 17 and Maven)"; exit 0; \
	fi; \
	mvn -B -q -f clients/java/pom.xml verify

## unit: the suite without starting servers (integration tests skip outside CI).
unit:
	$(call in_modules,$(GO) test -race -count=1 ./...)

## fuzz: run every fuzz target for FUZZTIME each (tools/fuzz.sh; make test runs it briefly).
## A failing input is written under the package's testdata/fuzz/<Target>/: commit it with
## the fix. FUZZFLAGS adds go test flags (e.g. -parallel=1 on a shared machine).
FUZZTIME ?= 20s
FUZZFLAGS ?=
fuzz:
	@if [ -f $(ENVFILE) ]; then set -a; . $(ENVFILE); set +a; fi; \
	GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZFLAGS="$(FUZZFLAGS)" MODULES="$(MODULES)" tools/fuzz.sh

## fuzz-smoke: every fuzz target for FUZZ_SMOKE_TIME (3s) each, part of make test. go test
## alone runs only a target's seed corpus, which cannot tell that its oracle went stale:
## a few seconds of fuzzing can. About thirty targets take 6 to 7 minutes on two cores (each run
## also builds and gathers the corpus' coverage); make fuzz is the long run.
FUZZ_SMOKE_TIME ?= 3s
fuzz-smoke:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZ_SMOKE_TIME)

bench: infra
	set -a; . $(ENVFILE); set +a; $(call in_modules,$(GO) test -run '^$$' -bench . -benchmem ./...)

## images: OCI images of distributor, player, cachectl and sportsbook, without a container
## engine: .run/images/<name>.tar (docker load -i), static binaries in .run/images/bin. The
## builder is in the deploy module; it builds the binaries in the root module.
images: deps
	cd deploy && $(GO) run ./images -out $(RUN)/images -version $(VERSION) -commit $(COMMIT) $(if $(CREATED),-created $(CREATED))

## chaos: the chaos run (cmd/internal/chaos) with its own PostgreSQL and Kafka: random faults
## for about DURATION while writers make at least CHANGES source changes, then every cache
## is checked against PostgreSQL. SEED replays a run's fault plan; RACE=1 builds the
## processes with the race detector. Exit status 1 when it finds a violation.
DURATION ?= 10m
CHANGES  ?= 100000
chaos: deps
	$(GO) run ./cmd/chaos -duration $(DURATION) -changes $(CHANGES) $(if $(SEED),-seed $(SEED)) $(if $(FAULTS),-faults $(FAULTS)) $(if $(RACE),-race)

## chaos-cluster: make chaos on a KRaft cluster of KAFKA_NODES (default 3) Kafka nodes of its
## own: the stream at replication factor 3 and min.insync.replicas=2, and the broker faults
## (a node killed, the partition leader killed in a transaction, a node paused past its
## session timeout, a node's data directory lost) among the others.
chaos-cluster: deps
	$(GO) run ./cmd/chaos -kafka-nodes $(KAFKA_NODES) -duration $(DURATION) -changes $(CHANGES) $(if $(SEED),-seed $(SEED)) $(if $(FAULTS),-faults $(FAULTS)) $(if $(RACE),-race)

## difftest: the long run of the WAL capture's differential test (TestWALDifferential in
## distributor/): random transactions on a corpus of view shapes, and after every batch each
## view's cache compared with its SQL on PostgreSQL, for DIFF_DURATION or DIFF_CHECKS checks,
## whichever ends first. SEED replays a run (the seed is printed first). Exit status 1 on a
## divergence, with the case shrunk (for up to 3 minutes more). DIFF_TIMEOUT is go test's
## -timeout: raise it with DIFF_DURATION.
DIFF_DURATION ?= 25m
DIFF_CHECKS   ?= 1000000
DIFF_TIMEOUT  ?= 2h
difftest: deps infra
	set -a; . $(ENVFILE); set +a; STATECAST_DIFF_DURATION=$(DIFF_DURATION) STATECAST_DIFF_CHECKS=$(DIFF_CHECKS) \
	  $(if $(SEED),STATECAST_DIFF_SEED=$(SEED)) $(GO) test -race -count=1 -timeout $(DIFF_TIMEOUT) -run '^TestWALDifferential$$' -v ./distributor/

## proto: regenerate schemas/gen from schemas/proto with buf (tools pinned in schemas/tools/go.mod).
proto:
	schemas/proto/gen.sh

## proto-check: fail when the committed schemas/gen differs from a fresh generation.
proto-check:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && schemas/proto/gen.sh "$$tmp" && \
	  diff -r schemas/gen "$$tmp/gen" && echo "schemas/gen is up to date" || { echo "schemas/gen is stale: run make proto" >&2; exit 1; }
