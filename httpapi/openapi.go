package httpapi

import (
	"net/http"

	"github.com/limitnode/limitnode/api"
)

// serveOpenAPI answers GET /v1/openapi.json with the API's contract,
// api/openapi.yaml as JSON.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	doc, err := api.JSON()
	if err != nil {
		writeError(w, &apiError{status: http.StatusInternalServerError, code: codeInternal, message: "the OpenAPI document does not convert: " + err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(doc)
}
