package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// profiler writes the profiles the benchmarks take of the processes they
// run into dir (the -profiles flag); a failure only loses a profile.
type profiler struct{ dir string }

// cpu takes CPU profiles of processes at the same time, named
// after the row (b1, b8) they are taken during.
func (p profiler) cpu(ctx context.Context, d time.Duration, rowID, shape string, names ...string) {
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return
	}
	for _, name := range names {
		addr := pprofAddrs[name]
		if addr == "" {
			continue
		}
		go func() {
			url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds()))
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			f, err := os.Create(filepath.Join(p.dir, rowID+"-"+strings.TrimPrefix(name, shape+"-")+"-"+shape+".pprof"))
			if err != nil {
				return
			}
			defer f.Close()
			_, _ = io.Copy(f, resp.Body)
		}()
	}
}

// heap writes the heap profile of process name (what B6's RSS
// is made of) to file under the profiles directory, and its goroutine
// profile (their stacks are the rest) next to it; a failure only loses
// a profile.
func (p profiler) heap(ctx context.Context, name, file string) {
	p.fetch(ctx, name, "heap?gc=1", file)
	p.fetch(ctx, name, "goroutine", strings.Replace(file, "-heap-", "-goroutine-", 1))
}

// fetch writes what process name's /debug/pprof/<path> answers to
// file under the profiles directory.
func (p profiler) fetch(ctx context.Context, name, path, file string) {
	addr := pprofAddrs[name]
	if addr == "" || os.MkdirAll(p.dir, 0o755) != nil {
		return
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/"+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(filepath.Join(p.dir, file))
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}
