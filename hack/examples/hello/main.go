// Command hello is the small workload Cairn's examples and end-to-end tests run: an HTTP server that
// says which pod and node answered, and a client that probes names and URLs from inside a pod. It is a
// static binary, packed into an image by hack/examples/helloimage, so nothing is pulled from a registry.
//
//	hello [serve] [--listen :8080]                   answer "hello from POD on NODE (IP)" (see greeting)
//	hello probe [--lookup NAME]... [--get URL]... [--count N]
//
// probe prints one line per answer ("lookup NAME: ADDR..." or "get URL: BODY") and exits non-zero if any
// lookup or request failed, so a pod's logs and phase tell a test everything.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	args := os.Args[1:]
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(args)
	case "probe":
		err = probe(args, os.Stdout)
	default:
		err = fmt.Errorf("unknown command %q: want serve or probe", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(1)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", ":8080", "address to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	host, _ := os.Hostname()
	greeting := greeting(os.Getenv("POD_NAME"), os.Getenv("NODE_NAME"), os.Getenv("POD_IP"), host, firstAddress())
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, greeting) })
	srv := &http.Server{Addr: *listen, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("listening on %s: %s", *listen, greeting)
	return srv.ListenAndServe()
}

// list is a repeatable flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func probe(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	var lookups, gets list
	fs.Var(&lookups, "lookup", "a name to resolve (repeatable)")
	fs.Var(&gets, "get", "a URL to fetch (repeatable)")
	count := fs.Int("count", 1, "how many times to fetch each URL, each on a new connection")
	if err := fs.Parse(args); err != nil {
		return err
	}
	failed := 0
	for _, name := range lookups {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		addrs, err := net.DefaultResolver.LookupHost(ctx, name)
		cancel()
		if err != nil {
			failed++
			fmt.Fprintf(out, "lookup %s: error: %v\n", name, err)
			continue
		}
		fmt.Fprintf(out, "lookup %s: %s\n", name, strings.Join(addrs, " "))
	}
	// A new connection per request, so a Service spreads them over its endpoints.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, u := range gets {
		for range *count {
			body, err := get(client, u)
			if err != nil {
				failed++
				fmt.Fprintf(out, "get %s: error: %v\n", u, err)
				continue
			}
			fmt.Fprintf(out, "get %s: %s\n", u, strings.TrimSpace(body))
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d probe(s) failed", failed)
	}
	return nil
}

func get(c *http.Client, u string) (string, error) {
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

// greeting is what the server answers. POD_NAME, NODE_NAME and POD_IP come from the downward API when
// the pod spec sets them (the e2e tests do); a Deployment made with `kubectl create deployment` sets
// none, so the pod's hostname (its name) and its first address stand in, and the node is left out
// rather than shown as unknown.
func greeting(pod, node, ip, hostname, addr string) string {
	if pod == "" {
		pod = hostname
	}
	if ip == "" {
		ip = addr
	}
	if node == "" {
		return fmt.Sprintf("hello from %s (%s)\n", pod, ip)
	}
	return fmt.Sprintf("hello from %s on %s (%s)\n", pod, node, ip)
}

// firstAddress is the first global unicast address of the pod's interfaces ("" if none).
func firstAddress() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}
