// The API's wire types, named: each is the schema of api/openapi.yaml as
// openapi-typescript generated it into openapi.ts, so the client's requests
// and answers cannot drift from the document the server is tested against.

import type { components } from "./openapi.js";

type Schemas = components["schemas"];

/** A limit: at most `rate` units of cost per `period`, `burst` at once for the bucket algorithms. */
export type Limit = Schemas["Limit"];
/** One check of a multi-check request. */
export type Check = Schemas["Check"];
/** The body of POST /v1/allow: one check inline, or several under `checks`. */
export type AllowRequest = Schemas["AllowRequest"];
/** The body of a /v1/allow answer. */
export type AllowResponse = Schemas["AllowResponse"];
/** One item of a /v1/allow/batch answer that was decided. */
export type BatchDecision = Schemas["BatchDecision"];
/** One item of a /v1/allow/batch answer that was refused. */
export type BatchError = Schemas["BatchError"];
/** The body of POST /v1/leases. */
export type LeaseRequest = Schemas["LeaseRequest"];
/** A granted (or renewed) lease. */
export type LeaseGranted = Schemas["LeaseGranted"];
/** A refused lease request. */
export type LeaseDenied = Schemas["LeaseDenied"];
/** The body of every error answer. */
export type ErrorBody = Schemas["Error"];
