package httpapi

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/contract"
)

// MaxBackupBodyBytes bounds the body of POST /v1/snapshot.
const MaxBackupBodyBytes = 4 << 30

// backupTransferTime is how long a backup may take to stream either way:
// the server's read and write timeouts are for ordinary requests.
const backupTransferTime = 30 * time.Minute

// backup answers GET /v1/snapshot with a backup file of this node's state,
// once it has caught up with what the leader had applied (the headers say
// which index it holds, and which node served it).
func (a *API) backup(w http.ResponseWriter, r *http.Request) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(backupTransferTime))
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	b, err := a.backend.Backups.Backup(ctx)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	info := b.Info()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", `attachment; filename="limitnode-`+strconv.FormatUint(info.Index, 10)+`.backup"`)
	h.Set("X-Limitnode-Applied-Index", strconv.FormatUint(info.Index, 10))
	h.Set("X-Limitnode-Limits-Digest", hex.EncodeToString(info.LimitsDigest[:]))
	h.Set("X-Limitnode-Served-By", a.backend.Observer.Status().SelfID)
	w.WriteHeader(http.StatusOK)
	if err := b.Write(w); err != nil {
		// The status is sent: all that is left is to cut the body short,
		// which the checksum at its end makes plain to the reader.
		a.opts.Logger.Warn("a backup was cut short", "err", err)
		panic(http.ErrAbortHandler)
	}
}

// restore answers POST /v1/snapshot: the body, a backup file, is checked
// whole and then replaces the cluster's state on every node at one index.
// Only the leader restores: another node answers 307 to the leader. A
// browser must send the body as application/octet-stream.
func (a *API) restore(w http.ResponseWriter, r *http.Request) {
	if err := refuseBrowserBody(r, "application/octet-stream"); err != nil {
		writeError(w, err)
		return
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(backupTransferTime))
	body := http.MaxBytesReader(w, r.Body, MaxBackupBodyBytes)
	info, restored, err := a.backend.Backups.Restore(r.Context(), body)
	var notLeader *contract.NotLeaderError
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &notLeader) && notLeader.LeaderHTTPAddr != "":
		scheme := "http://"
		if r.TLS != nil {
			scheme = "https://"
		}
		w.Header().Set("Location", scheme+notLeader.LeaderHTTPAddr+"/v1/snapshot")
		writeError(w, &apiError{status: http.StatusTemporaryRedirect, code: codeUnavailable, message: notLeader.Error()})
	case errors.As(err, &notLeader):
		writeError(w, unavailable(notLeader.Error()))
	case errors.As(err, &tooLarge):
		writeError(w, decodeError(err, MaxBackupBodyBytes))
	case err != nil:
		a.writeClusterError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, wire.Restored{BackupIndex: info.Index, RestoredIndex: restored, LimitsDigest: hex.EncodeToString(info.LimitsDigest[:])})
	}
}
