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
/** The body of POST /v1/settle. */
export type SettleRequest = Schemas["SettleRequest"];
/** The answer of a settlement. */
export type Settlement = Schemas["Settlement"];
/** What the cluster holds of one key: its state under each limit that has any. */
export type KeyState = Schemas["KeyState"];
/** A key's state under one limit. */
export type KeyLimit = Schemas["KeyLimit"];
/** A page of the live keys. */
export type KeyPage = Schemas["KeyPage"];
/** The answer of a key's reset. */
export type KeyReset = Schemas["KeyReset"];
/** A blocked key. */
export type Block = Schemas["Block"];
/** A page of the blocked keys. */
export type BlockPage = Schemas["BlockPage"];
/** A policy to store. */
export type PolicyRequest = Schemas["PolicyRequest"];
/** A stored policy. */
export type Policy = Schemas["Policy"];
/** A page of the policies. */
export type PolicyPage = Schemas["PolicyList"];
/** A policy's penalty: block a key it denies often. */
export type Penalty = Schemas["Penalty"];
/** Shares of a key's budget that every node decides from. */
export type LocalShares = Schemas["LocalShares"];
/** The body of POST /v1/shares/return: a share to give back. */
export type ShareReturn = Schemas["ShareReturn"];
/** The decision of one check of a request. */
export type CheckResult = Schemas["CheckResult"];
/** What denied a request. */
export type DeniedBy = Schemas["DeniedBy"];
/** Why a block denied a request. */
export type Blocked = Schemas["Blocked"];
