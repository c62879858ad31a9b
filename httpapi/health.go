package httpapi

import (
	"net/http"

	"github.com/limitnode/limitnode/api/wire"
)

func (a *API) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (a *API) readyz(w http.ResponseWriter, _ *http.Request) {
	if why := a.backend.Observer.Ready(); why != "" {
		writeJSON(w, http.StatusServiceUnavailable, wire.Readiness{Status: "not ready", Reason: why})
		return
	}
	writeJSON(w, http.StatusOK, wire.Readiness{Status: "ready"})
}
