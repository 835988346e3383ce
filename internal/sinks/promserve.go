package sinks

// The /metrics endpoint: its listen address, serving it and closing it.

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// listenAddr applies the loopback default to a listen address.
func listenAddr(s string) (string, error) {
	if _, err := strconv.Atoi(s); err == nil {
		return net.JoinHostPort("127.0.0.1", s), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("prometheus listen address %q: want PORT, :PORT or HOST:PORT", s)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// Serve serves /metrics at a (NCCL_HOOKS_PROM_ADDR): a bare port or ":port"
// binds to 127.0.0.1; give a host ("0.0.0.0:9464") to listen elsewhere. An
// error leaves the sink as it was: the textfiles go on without the endpoint.
func (p *Prom) Serve(a string) error {
	if p.srv != nil {
		return fmt.Errorf("prometheus /metrics endpoint: already serving at %s", p.addr)
	}
	addr, err := listenAddr(a)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("prometheus /metrics endpoint: %w (choose another port)", err)
	}
	reg := prometheus.NewRegistry()
	// The plugin's Go runtime (go_goroutines, go_memstats_*): the only Go
	// runtime of a job's process, so these describe the plugin alone.
	// Not in the textfiles, which node_exporter merges across processes.
	reg.MustRegister(promCollector{p: p, device: -1}, collectors.NewGoCollector())
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	p.addr = ln.Addr()
	go p.srv.Serve(ln) // returns http.ErrServerClosed at Close
	return nil
}

// Addr is the /metrics endpoint's address, nil without one.
func (p *Prom) Addr() net.Addr { return p.addr }

// Close stops the /metrics endpoint and the OTLP export. The textfiles
// stay: they hold the final values.
func (p *Prom) Close() error {
	p.mu.Lock()
	e := p.otlp
	p.mu.Unlock()
	if e != nil {
		e.close()
	}
	if p.srv == nil {
		return nil
	}
	err := p.srv.Close()
	p.srv = nil
	if err != nil {
		return fmt.Errorf("prometheus /metrics endpoint: %w", err)
	}
	return nil
}
