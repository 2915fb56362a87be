# Cairn's entry point for everything: `make help` lists the targets.
SHELL := /bin/bash
OUT := _out
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) \
	-X github.com/cairn-os/cairn/cairnctl/cmd.Version=$(VERSION) -X github.com/cairn-os/cairn/cairnctl/cmd.Commit=$(COMMIT)
export CGO_ENABLED := 0
# grpcnotrace leaves golang.org/x/net/trace (and with it html/template) out of gRPC; hack/check-methods.sh
# says why that matters.
GOTAGS := grpcnotrace

.PHONY: help build api lint unit integration e2e e2e-join e2e-ha e2e-powercut e2e-upgrade e2e-install e2e-platforms e2e-tpm fuzz reliability conformance conformance-smoke bench test run run-sandbox deps clean bundle payload image size kernel kernel-check repro-check example-image

help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

build: ## build _out/machined and _out/cairnctl (static)
	@mkdir -p $(OUT)
	$(GO) build -trimpath -tags $(GOTAGS) -ldflags '$(LDFLAGS)' -o $(OUT)/machined ./machined
	$(GO) build -trimpath -tags $(GOTAGS) -ldflags '$(LDFLAGS)' -o $(OUT)/cairnctl ./cairnctl

bundle: ## build the Kubernetes bundle into _out/bundle (cached: an unchanged bundle is not rebuilt)
	./hack/bundle/build.sh

payload: build bundle ## the Kubernetes payload tree _out/payload (what sandbox mode runs from; make image also packs it)
	./hack/deps.sh image
	$(GO) run ./image/cmd/mkimage -out $(OUT) -bundle $(OUT)/bundle -payload-only

image: ## build the bootable image: _out/vmlinuz, vmlinux, initramfs.cpio.zst, payload.squashfs, cairn.efi, cairn.iso, cairn.raw, cairn-gce.tar.gz, cairn-upgrade.tar (KERNEL_ROOT=_out/kernel/root: with make kernel's kernel)
	VERSION=$(VERSION) SIGN_KEY=$(SIGN_KEY) KERNEL_ROOT=$(KERNEL_ROOT) ./hack/build-image.sh

kernel: ## Cairn's own kernel from Debian's source and configuration, the image's drivers built in, into _out/kernel/root (about 45 min on two cores; not the default kernel, not in make test)
	./hack/kernel/build.sh

example-image: ## _out/examples/hello.tar: the example workload's image archive, for `cairnctl image import`
	$(GO) run ./hack/examples/helloimage/cmd -o $(OUT)/examples/hello.tar

size: ## what the built image is made of: the downloads, the boot part, the payload piece by piece (raw and compressed)
	@mkdir -p $(OUT)/bench
	$(GO) run ./image/cmd/size -out $(OUT) -json $(OUT)/bench/size.json

kernel-check: ## list the kernel options Cairn needs that the shipped kernel lacks
	./hack/deps.sh image
	$(GO) run ./kernel-config/cmd/kernel-check $(KERNEL_CONFIG)

repro-check: build bundle ## build the image twice and compare every artifact
	./hack/deps.sh image
	$(GO) run ./image/cmd/mkimage -out $(OUT) -machined $(OUT)/machined -bundle $(OUT)/bundle -version $(VERSION) -repro-check

api: ## regenerate the protobuf Go code under api/machine
	./hack/deps.sh build
	./hack/genproto.sh

lint: ## gofmt, go vet and staticcheck (with each build tag: integration, e2e, bench), and no method lookup by name in machined or cairnctl
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration ./...
	$(GO) vet -tags e2e ./...
	$(GO) vet -tags bench ./...
	$(GO) tool staticcheck ./...
	$(GO) tool staticcheck -tags integration ./...
	$(GO) tool staticcheck -tags e2e ./...
	$(GO) tool staticcheck -tags bench ./...
	GOTAGS=$(GOTAGS) ./hack/check-methods.sh

unit: ## unit tests: no root, under a minute
	./hack/deps.sh cgo
	CGO_ENABLED=1 $(GO) test -race -timeout 5m ./...
	cd image/bundle && $(GO) test ./...
	cd image/bundle/kube && $(GO) test ./dispatch/ ./flanneld/ ./proxyenv/
	cd image/bundle/kube/conntrack && $(GO) test ./...
	cd image/bundle/conformance && $(GO) test ./junit/ ./testimages/

integration: build bundle payload ## root integration tests: loop devices, mounts, namespaces, sandbox machined, the bundle, a conformance smoke run
	./hack/deps.sh test qemu # qemu: cairnctl/internal/qemu boots the fake-machined image
	./hack/deps.sh cgo # the TPM simulator of the encrypted-volume tests
	CAIRN_REQUIRE_TOOLS=1 $(GO) test -tags integration -count=1 -timeout 30m -p 1 ./...
	cd image/bundle && $(GO) test -tags integration -timeout 10m ./itest/ ./mount/
	$(MAKE) --no-print-directory conformance-smoke

# A few conformance tests that cover what the whole suite found: DNS, Services through kube-proxy, host
# ports, env from a Secret, a pull with imagePullPolicy: Always (through the mirror).
SMOKE := \[sig-network\] DNS should provide DNS for the cluster|\[sig-network\] Services should serve a basic endpoint from pods|\[sig-network\] HostPort validates that there is no conflict|\[sig-node\] Secrets should be consumable via the environment|\[sig-auth\] Projected PodCertificate.*should allow server and client pods

conformance-smoke: payload ## a handful of conformance tests on a sandbox node (part of make integration)
	FOCUS='$(SMOKE)' ./hack/conformance.sh

e2e: image ## end-to-end tests: QEMU boots of the built image, driven only through cairnctl
	./hack/deps.sh qemu
	$(GO) test -tags e2e -timeout 80m -count=1 -v ./hack/e2e/

e2e-join: image ## TestJoin with a third VM that joins by itself from its kernel command line (not in make test: see TestJoin)
	./hack/deps.sh qemu
	CAIRN_E2E_JOIN=1 $(GO) test -tags e2e -timeout 70m -count=1 -v -run 'TestJoin$$' ./hack/e2e/

e2e-ha: image ## three control planes and a worker behind a VIP: the holder powered off, back, one reset (25-40 min on a fast 2-core host; not in make test)
	./hack/deps.sh qemu
	CAIRN_E2E_HA=1 $(GO) test -tags e2e -timeout 100m -count=1 -v -run 'TestHA$$' ./hack/e2e/

e2e-powercut: image ## power cuts during Init, a worker's join with PHASE=join, a control plane's with PHASE=cpjoin or a reset with PHASE=reset (POINTS, default 20, about six, three, five and fifteen minutes each; SEED repeats a run): tried / survived / formatted twice or etcd data lost (not in make test)
	./hack/deps.sh qemu
	CAIRN_E2E_POWERCUT=1 CAIRN_POWERCUT_PHASE=$(PHASE) CAIRN_POWERCUT_POINTS=$(or $(POINTS),20) CAIRN_POWERCUT_SEED=$(SEED) $(GO) test -tags e2e -timeout 300m -count=1 -v -run 'TestPowerCut$$' ./hack/e2e/

e2e-upgrade: image ## upgrade a raw-disk node to a second build, roll back, then survive a broken image (10-25 minutes; not in make test)
	./hack/deps.sh qemu
	CAIRN_E2E_UPGRADE=1 $(GO) test -tags e2e -timeout 60m -count=1 -v -run 'TestUpgrade$$' ./hack/e2e/

e2e-platforms: image ## TestUserData from cairn.raw: a control plane that inits itself and workers that join by themselves from NoCloud and IMDSv2 user data (CAIRN_E2E_PLATFORMS=1; make e2e runs only its malformed-user-data part)
	./hack/deps.sh qemu
	CAIRN_E2E_PLATFORMS=1 $(GO) test -tags e2e -timeout 60m -count=1 -v -run 'TestUserData$$' ./hack/e2e/

e2e-tpm: image ## TestAttestedJoin (workers with their own swtpm join by themselves and by cairnctl join, the control plane checks each quote) and TestEncryptedState (STATE LUKS2 with its key sealed to the swtpm: unlocks across a reboot, a fresh TPM cannot, the recovery key can) (CAIRN_E2E_TPM=1; not in make test)
	./hack/deps.sh qemu
	CAIRN_E2E_TPM=1 $(GO) test -tags e2e -timeout 80m -count=1 -v -run 'TestAttestedJoin$$|TestEncryptedState$$' ./hack/e2e/

e2e-install: image ## TestInstall alone (it is in make e2e): boot the ISO through UEFI, init, refuse a foreign disk, install onto a blank one and come back Running from it (about 9 minutes)
	./hack/deps.sh qemu
	$(GO) test -tags e2e -timeout 40m -count=1 -v -run 'TestInstall$$' ./hack/e2e/

conformance: payload ## Kubernetes' conformance suite on a sandbox node (CLUSTER=qemu: a QEMU 1+1 cluster, a subset); not in make test
	./hack/conformance.sh

# Every fuzz target, FUZZTIME each (go test runs one -fuzz target per package at a time). Their seeds
# also run as ordinary tests in make unit; what a run finds is saved under the package's testdata/fuzz/.
FUZZTIME ?= 30s
FUZZ := FuzzParse:./api/config/ FuzzParse:./machined/internal/cmdline/ FuzzInspect:./machined/internal/images/ \
	FuzzProbe:./machined/internal/disk/probe/ FuzzUse:./machined/internal/joinsvc/

fuzz: ## the fuzz targets (machine config, kernel command line, image archives, disk signatures, join tokens), FUZZTIME each (default 30s); not in make test
	@for f in $(FUZZ); do echo "== $${f%%:*} $${f#*:}"; $(GO) test -run '^$$' -fuzz "^$${f%%:*}$$" -fuzztime $(FUZZTIME) "$${f#*:}" || exit 1; done

reliability: build ## issue 16's figures: 200 mutual-TLS clients against a sandbox node (CAIRN_LOAD_SECONDS, default 60; also part of make integration), then make fuzz; not in make test
	./hack/deps.sh test
	$(GO) test -tags integration -count=1 -v -timeout 10m -run 'TestLoad$$' ./hack/sandboxtest/
	$(MAKE) --no-print-directory fuzz

bench: image size ## figures: the sizes (make size: the downloads piece by piece), then boot time, API latency, Init to Running (prints, never asserts; KERNEL_ROOT=_out/kernel/root: with make kernel's kernel, the floor too)
	CAIRN_KERNEL_ROOT=$(KERNEL_ROOT) ./hack/bench/bench.sh

test: unit integration e2e ## every test layer (the README's test command; CI runs it)

run: ## build the image and boot a one-node cluster in QEMU; prints kubectl get nodes
	./hack/run-cluster.sh

run-sandbox: build ## machined as an ordinary process under _out/sandbox, inited through cairnctl (no VM)
	./hack/run-sandbox.sh

deps: ## install the Debian packages the build and tests need
	./hack/deps.sh build test image bundle qemu conformance

clean: ## remove build outputs
	rm -rf $(OUT)
