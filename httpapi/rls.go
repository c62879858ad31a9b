package httpapi

import (
	"context"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/limitnode/limitnode/rls"
	"go.yaml.in/yaml/v3"
)

// The configurations of the Envoy rate limit service (see package rls),
// one per domain: PUT takes envoyproxy/ratelimit's YAML (or the same as
// JSON, which is YAML too), GET answers JSON, or YAML when the request
// accepts application/yaml.

// yamlContentType is the media type of a configuration as YAML.
const yamlContentType = "application/yaml"

func (a *API) listRLSDomains(w http.ResponseWriter, r *http.Request) {
	domains, err := a.backend.RLS.RLSDomains(r.Context())
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	if domains == nil {
		domains = []string{}
	}
	writeJSON(w, http.StatusOK, map[string][]string{"domains": domains})
}

func (a *API) getRLSDomain(w http.ResponseWriter, r *http.Request) {
	domain := r.PathValue("domain")
	c, ok, err := a.backend.RLS.RLSConfig(r.Context(), domain)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	if !ok {
		writeError(w, notFound("domain", "no rate limit service domain %q", domain))
		return
	}
	writeRLSConfig(w, r, &c)
}

func (a *API) putRLSDomain(w http.ResponseWriter, r *http.Request) {
	domain := r.PathValue("domain")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, rls.MaxConfigBytes))
	if err != nil {
		writeError(w, decodeError(err, rls.MaxConfigBytes))
		return
	}
	c, cerr := rls.Parse(body)
	if cerr != nil {
		writeError(w, fromContract(cerr))
		return
	}
	if c.Domain != domain {
		writeError(w, invalid("domain", "the configuration is for domain %q but the path names %q", c.Domain, domain))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	if err := a.backend.RLS.PutRLSConfig(ctx, c); err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	writeRLSConfig(w, r, &c)
}

func (a *API) deleteRLSDomain(w http.ResponseWriter, r *http.Request) {
	domain := r.PathValue("domain")
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	if err := a.backend.RLS.DeleteRLSConfig(ctx, domain); err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": domain})
}

// writeRLSConfig answers with a configuration: YAML when the request
// accepts application/yaml before JSON, else JSON.
func writeRLSConfig(w http.ResponseWriter, r *http.Request, c *rls.Config) {
	if !prefersYAML(r.Header.Get("Accept")) {
		writeJSON(w, http.StatusOK, c)
		return
	}
	out, err := yaml.Marshal(c)
	if err != nil {
		writeError(w, &apiError{status: http.StatusInternalServerError, code: codeInternal, message: "encode the configuration as YAML: " + err.Error()})
		return
	}
	w.Header().Set("Content-Type", yamlContentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// prefersYAML reports whether an Accept header names application/yaml (or
// its older spellings) before application/json.
func prefersYAML(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case yamlContentType, "application/x-yaml", "text/yaml":
			return true
		case "application/json":
			return false
		}
	}
	return false
}
