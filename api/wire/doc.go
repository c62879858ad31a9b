// Package wire holds the JSON bodies of limitnode's HTTP API, the one
// definition that the server (package httpapi) and the Go client (package
// client) both use, so that the two cannot spell a field differently.
// api/openapi.yaml describes the same bodies; the schema tests of httpapi
// check real exchanges against it.
//
// A field is a pointer where the server must tell a value left out from a
// zero one (a limit's rate and burst, a cost, a duration): the client leaves
// it nil to mean "the default", the server refuses what is missing by name.
// The package is types only: no validation (package contract has it) and
// nothing beyond the standard library, so a client pulls in nothing else.
package wire
