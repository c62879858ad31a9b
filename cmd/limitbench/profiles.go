package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// With -node-profiles, the limitnode processes run with -pprof, and
// limitbench takes a CPU profile of each over every measured window, so a
// missed target comes with where each node spent its CPU (go tool pprof
// -top FILE).

// watchProfiles starts a CPU profile of each of tgt's nodes when the
// measured window opens, lasting the window, and returns a function that
// waits for them and names their files in r. Without dir, or for targets
// whose servers are not limitnode processes, it does nothing.
func watchProfiles(tgt target, p loadPoint, w window, dir string) func(r *result) {
	s, ok := tgt.(staged)
	if dir == "" || !ok || whereOf(tgt) != whereProcesses {
		return func(*result) {}
	}
	nodes := s.metricsNodes()
	seconds := max(int(w.end.Sub(w.from).Round(time.Second)/time.Second), 1)
	client := &http.Client{Timeout: time.Duration(seconds)*time.Second + 30*time.Second}
	files := make([]string, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		files[i] = filepath.Join(dir, profileName(tgt.name(), p, n.name))
		wg.Go(func() {
			time.Sleep(time.Until(w.from))
			errs[i] = fetchProfile(client, strings.TrimSuffix(n.url, "/metrics")+"/debug/pprof/profile?seconds="+strconv.Itoa(seconds), files[i])
		})
	}
	return func(r *result) {
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				r.ProfileError = errors.Join(errors.New(r.ProfileError), err).Error()
				continue
			}
			r.Profiles = append(r.Profiles, files[i])
		}
		r.ProfileError = strings.TrimSpace(r.ProfileError)
	}
}

// profileName is a profile's file name: target, load and node, with what
// a file name cannot hold replaced.
func profileName(target string, p loadPoint, node string) string {
	name := fmt.Sprintf("%s-%s-%d-%s.pprof", target, p, p.callers, node)
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		default:
			return '_'
		}
	}, name)
}

// fetchProfile writes the profile at url into path.
func fetchProfile(client *http.Client, url, path string) error {
	resp, err := client.Get(url)
	if err != nil {
		return fmt.Errorf("profile %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("profile %s: %d %s", url, resp.StatusCode, body)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile %s: %w", url, err)
	}
	return f.Close()
}
