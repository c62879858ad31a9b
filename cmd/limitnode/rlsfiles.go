package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/rls"
)

// rlsFile is one file of -rls-config as read: its path and its content.
type rlsFile struct {
	path string
	data []byte
}

// maxRLSFiles bounds the files of an -rls-config directory: one domain
// each, so no more than the cluster holds.
const maxRLSFiles = fsm.MaxRLSDomains

// readRLSFiles reads -rls-config: the file at path, or every file of the
// directory at path, in name order, each of at most rls.MaxConfigBytes.
// In a directory, a name that starts with "." is skipped (a mounted
// Kubernetes ConfigMap keeps its versions in ..data and ..<timestamp>,
// editors their swap files so: envoyproxy/ratelimit's
// RUNTIME_IGNOREDOTFILES), a symbolic link is followed (a ConfigMap's files
// are links into ..data), and what is not a regular file once followed is
// skipped.
func readRLSFiles(path string) ([]rlsFile, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		data, err := readBounded(path, rls.MaxConfigBytes)
		if err != nil {
			return nil, err
		}
		return []rlsFile{{path: path, data: data}}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var files []rlsFile
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		file := filepath.Join(path, e.Name())
		info, err := os.Stat(file)
		if err != nil {
			return nil, err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		if len(files) == maxRLSFiles {
			return nil, fmt.Errorf("%s holds more than %d files; each is one domain, and the cluster holds at most %d", path, maxRLSFiles, fsm.MaxRLSDomains)
		}
		data, err := readBounded(file, rls.MaxConfigBytes)
		if err != nil {
			return nil, err
		}
		files = append(files, rlsFile{path: file, data: data})
	}
	return files, nil
}

// parseRLSFiles parses each file as one domain's configuration; two files
// of one domain are an error (as in envoyproxy/ratelimit without merging).
// An error names the file, the field and the line.
func parseRLSFiles(files []rlsFile) ([]rls.Config, error) {
	var out []rls.Config
	seen := map[string]string{}
	for _, f := range files {
		c, err := rls.Parse(f.data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		if other, ok := seen[c.Domain]; ok {
			return nil, fmt.Errorf("%s: domain %q is configured in %s too", f.path, c.Domain, other)
		}
		seen[c.Domain] = f.path
		out = append(out, c)
	}
	return out, nil
}

// readRLSConfigs reads and parses -rls-config (readRLSFiles,
// parseRLSFiles).
func readRLSConfigs(path string) ([]rls.Config, error) {
	files, err := readRLSFiles(path)
	if err != nil {
		return nil, err
	}
	return parseRLSFiles(files)
}

// readBounded reads a file of at most maxBytes.
func readBounded(path string, maxBytes int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() > maxBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d a configuration may have", path, info.Size(), maxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > maxBytes {
		return nil, fmt.Errorf("%s: more than the %d bytes a configuration may have", path, maxBytes)
	}
	return data, nil
}
