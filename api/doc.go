// Package api holds the contract of limitnode's HTTP API as an OpenAPI 3.1
// document, api/openapi.yaml, embedded in the binary.
//
// The YAML file is the source; YAML returns it as written and JSON returns
// the same document converted to JSON, the form served at
// GET /v1/openapi.json. The tests of package httpapi load the document and
// validate real requests and responses of the handler against it, so the
// document and the server cannot drift apart unnoticed.
package api
