// Command cairn-echo is the e2e test workload: a tiny HTTP server whose
// answer names the host (the pod) it runs in, so a test can tell which
// replica answered.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Greeting is the fixed line every answer ends with; tests match on it.
const Greeting = "cairn-echo: hello from Cairn"

func main() {
	listen := flag.String("listen", ":8080", "address to serve HTTP on")
	flag.Parse()

	host, err := os.Hostname()
	if err != nil {
		log.Fatalf("cairn-echo: hostname: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, *listen, handler(host)); err != nil {
		log.Fatalf("cairn-echo: %v", err)
	}
}

// handler answers GET / with the hostname and the greeting, and /healthz
// with "ok" for probes.
func handler(host string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "%s\n%s\n", host, Greeting)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// serve runs until ctx is cancelled, then drains for up to five seconds so
// a pod being deleted finishes the requests it already accepted.
func serve(ctx context.Context, addr string, h http.Handler) error {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Printf("cairn-echo: listening on %s", addr)
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", addr, err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shut down %s: %w", addr, err)
	}
	return nil
}
