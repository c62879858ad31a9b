package httpapi

import "net/http"

func (a *API) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (a *API) readyz(w http.ResponseWriter, _ *http.Request) {
	if why := a.limiter.Ready(); why != "" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": why})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
