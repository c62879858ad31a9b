package cluster_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/internal/testhooks"
	"github.com/limitnode/limitnode/testcluster"
)

// TestBackupUnderLoadRestoresIntoANewCluster takes a backup of a cluster
// while clients spend keys, restores it into a fresh 3-node cluster, and
// finds there the limits state of the backup's index (the same digest on
// every node) and limits that go on from where they were. Truncated,
// corrupted and foreign files are refused with a 400 and change nothing.
func TestBackupUnderLoadRestoresIntoANewCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := testcluster.Start(t, 3)
	srcClient := client.NewWithOptions(client.Options{HTTPClient: httpClient}, src.Nodes[1].URL())
	cost := int64(5)
	if d, err := srcClient.Allow(ctx, client.AllowRequest{Key: "spent", Limit: &client.Limit{Rate: 5, Period: time.Hour}, Cost: cost}); err != nil || !d.Allowed {
		t.Fatalf("spend: %+v, %v", d, err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				_, _ = srcClient.Allow(ctx, client.AllowRequest{Key: fmt.Sprintf("load-%d-%d", w, i%50), Limit: &client.Limit{Rate: 1000, Period: time.Hour}})
			}
		})
	}
	var file bytes.Buffer
	info, err := srcClient.Backup(ctx, &file)
	stop.Store(true)
	wg.Wait()
	if err != nil || info.Index == 0 || info.ServedBy != "n2" {
		t.Fatalf("backup: %+v, %v", info, err)
	}

	dst := testcluster.Start(t, 3)
	dstClient := client.NewWithOptions(client.Options{HTTPClient: httpClient}, dst.Followers()[0].URL())
	_, before := testhooks.NodeLimitsDigest(dst.WaitLeader().Node())
	dstID := dst.WaitLeader().Node().ClusterID()
	if srcID := src.WaitLeader().Node().ClusterID(); !bytes.Contains(file.Bytes()[:200], []byte(srcID)) {
		t.Fatalf("the backup's header does not name its cluster %s", srcID)
	}
	bad := map[string][]byte{
		"truncated":          file.Bytes()[:file.Len()/2],
		"corrupted":          corrupt(file.Bytes()),
		"foreign":            []byte("PK\x03\x04 not a limitnode backup at all"),
		"empty":              nil,
		"with a huge length": withLength(file.Bytes(), ^uint64(0)),
	}
	for name, data := range bad {
		_, err := dstClient.Restore(ctx, bytes.NewReader(data), int64(len(data)))
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || strings.Contains(apiErr.Message, "-") {
			t.Errorf("a %s file: %v, want a 400 without a negative length", name, err)
		}
	}
	if _, after := testhooks.NodeLimitsDigest(dst.WaitLeader().Node()); after != before {
		t.Fatal("a refused file changed the state")
	}

	// Through a follower: it answers with the leader's address, which the
	// client follows.
	res, err := dstClient.Restore(ctx, bytes.NewReader(file.Bytes()), int64(file.Len()))
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if res.LimitsDigest != info.LimitsDigest || res.BackupIndex != info.Index {
		t.Fatalf("restore answered %+v for the backup %+v", res, info)
	}
	for _, n := range dst.Nodes {
		testenv.WaitFor(t, n.ID+" to hold the backup's state", func() bool {
			_, got := testhooks.NodeLimitsDigest(n.Node())
			return hex.EncodeToString(got[:]) == info.LimitsDigest
		})
	}
	for _, n := range dst.Nodes {
		if got := n.Node().ClusterID(); got != dstID {
			t.Fatalf("%s belongs to cluster %s after the restore, want its own %s", n.ID, got, dstID)
		}
	}
	// Asked under request IDs (decided): an election on a loaded machine
	// may leave an answer's outcome unknown.
	if a := decided(t, dst.Nodes[0].URL()+"/v1/allow", `{"key":"spent","limit":{"rate":5,"period":"1h"}}`); a.status != http.StatusTooManyRequests {
		t.Fatalf("the spent key in the new cluster: %d %+v; want it still spent", a.status, a)
	}
	if a := decided(t, dst.Nodes[0].URL()+"/v1/allow", `{"key":"fresh","limit":{"rate":5,"period":"1h"}}`); a.status != http.StatusOK {
		t.Fatalf("a fresh key in the new cluster: %d %+v", a.status, a)
	}
}

// withLength is a copy of a backup file whose state length field says
// length, its checksum made right again, as a tool that wrote a damaged
// length would leave it.
func withLength(data []byte, length uint64) []byte {
	out := bytes.Clone(data)
	binary.BigEndian.PutUint64(out[len(out)-40:], length)
	sum := sha256.Sum256(out[:len(out)-32])
	copy(out[len(out)-32:], sum[:])
	return out
}

// corrupt changes one byte in the middle of a copy of data.
func corrupt(data []byte) []byte {
	out := bytes.Clone(data)
	out[len(out)/2] ^= 0xFF
	return out
}

// TestACraftedBackupCannotMoveTimeOn: the backup's checksum is not keyed,
// so anyone can write a file that passes it. One whose state says the
// latest time a state may hold (a 175-byte file used to restore with 200,
// after which cluster time stood still for good) is refused with a 400
// that says why, and a spent key stays spent.
func TestACraftedBackupCannotMoveTimeOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testcluster.Start(t, 3)
	cl := client.NewWithOptions(client.Options{HTTPClient: httpClient}, c.WaitLeader().URL())
	cost := int64(5)
	spent := client.AllowRequest{Key: "spent", Limit: &client.Limit{Rate: 5, Period: time.Hour}}
	if d, err := cl.Allow(ctx, client.AllowRequest{Key: spent.Key, Limit: spent.Limit, Cost: cost}); err != nil || !d.Allowed {
		t.Fatalf("spend: %+v, %v", d, err)
	}
	file := craftedBackup(t, fsm.MaxNowNanos)
	_, err := cl.Restore(ctx, bytes.NewReader(file), int64(len(file)))
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "ahead") {
		t.Fatalf("a %d-byte backup from the year 2160: %v, want a 400 about its time", len(file), err)
	}
	if d, err := cl.Allow(ctx, spent); err != nil || d.Allowed {
		t.Fatalf("the spent key after the crafted restore: %+v, %v; want it still spent", d, err)
	}
}

// TestRepeatedRestoresCannotWalkTimeOn restores, over HTTP, hand-written
// backups each 50 s ahead of cluster time as the cluster then reads it: the
// first is restored and moves time 50 s on; the second, 50 s ahead of the
// time the first left, would take time 100 s past where it was, and is a
// 400 saying earlier restores moved it already. A backup of an hour ago
// rewinds time until the next stamp, and does not let a third 50 s ahead
// through either; one 5 s ahead, within the minute in all, is taken. Cluster
// time then stands at most a minute (and the time the test took) past
// where it started.
func TestRepeatedRestoresCannotWalkTimeOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testcluster.Start(t, 1)
	url := c.WaitLeader().URL()
	cl := client.NewWithOptions(client.Options{HTTPClient: httpClient}, url)
	clusterTime := func() int64 {
		t.Helper()
		a := post(t, url+"/v1/allow", `{"key":"clock","limit":{"rate":1,"period":"1h"},"cost":0}`)
		at, err := strconv.ParseInt(a.header.Get("X-Limitnode-Decided-At"), 10, 64)
		if a.status != 200 || err != nil {
			t.Fatalf("reading cluster time: %d, %q", a.status, a.header.Get("X-Limitnode-Decided-At"))
		}
		return at
	}
	restore := func(ahead time.Duration) (before int64, err error) {
		t.Helper()
		before = clusterTime()
		file := craftedBackup(t, before+int64(ahead))
		_, err = cl.Restore(ctx, bytes.NewReader(file), int64(len(file)))
		return before, err
	}
	const ahead = 50 * time.Second
	began := time.Now()
	start, err := restore(ahead)
	if err != nil {
		t.Fatalf("the first restore 50 s ahead: %v", err)
	}
	if now := clusterTime(); now < start+int64(ahead) {
		t.Fatalf("after the first restore cluster time is %s past where it was, want at least %s", time.Duration(now-start), ahead)
	}
	_, err = restore(ahead)
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "earlier restores already moved") {
		t.Fatalf("a second restore 50 s ahead: %v, want a 400 saying earlier restores moved time already", err)
	}
	if _, err := restore(-time.Hour); err != nil {
		t.Fatalf("a backup of an hour ago: %v", err)
	}
	if _, err = restore(ahead); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("a restore 50 s ahead after one from the past: %v, want a 400", err)
	}
	if _, err := restore(5 * time.Second); err != nil {
		t.Fatalf("a restore 5 s ahead, 55 s in all: %v", err)
	}
	if moved, limit := time.Duration(clusterTime()-start), fsm.MaxRestoreAhead+time.Since(began); moved > limit {
		t.Fatalf("after the restores cluster time is %s past where it was, more than %s", moved, limit)
	}
}

// craftedBackup writes a backup file by hand, as anyone could: an empty
// state at time nowNanos, framed and checksummed as the format says.
func craftedBackup(t *testing.T, nowNanos int64) []byte {
	t.Helper()
	f := fsm.New(nil)
	data, err := fsm.Encode(fsm.CommandLeaseTick, &fsm.LeaseTickCommand{NowNanos: nowNanos})
	if err != nil {
		t.Fatal(err)
	}
	f.ApplyEntry(1, data)
	index, state := f.Backup()
	var body bytes.Buffer
	if err := state.Write(&body); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.WriteString("LNBACKUP")
	_ = binary.Write(&out, binary.BigEndian, uint32(2))
	_ = binary.Write(&out, binary.BigEndian, index)
	digest := state.LimitsDigest()
	out.Write(digest[:])
	out.Write(make([]byte, 64))
	out.Write(body.Bytes())
	_ = binary.Write(&out, binary.BigEndian, uint64(body.Len()))
	sum := sha256.Sum256(out.Bytes())
	out.Write(sum[:])
	return out.Bytes()
}

// TestABackupOfTheFirstFormatStillRestores restores testdata/backup-v1, a
// backup an earlier release wrote (its state in snapshot format version
// 1: a policy "plan" and a key spent under it), into a new three-node
// cluster: every node holds the limits digest the backup recorded, and
// the policy is there.
func TestABackupOfTheFirstFormatStillRestores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	file, err := os.ReadFile("testdata/backup-v1")
	if err != nil {
		t.Fatal(err)
	}
	digest, err := os.ReadFile("testdata/backup-v1.digest")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(digest))
	dst := testcluster.Start(t, 3)
	dstClient := client.NewWithOptions(client.Options{HTTPClient: httpClient}, dst.Nodes[0].URL())
	res, err := dstClient.Restore(ctx, bytes.NewReader(file), int64(len(file)))
	if err != nil || res.LimitsDigest != want {
		t.Fatalf("restore: %+v, %v; want the limits digest %s", res, err, want)
	}
	for _, n := range dst.Nodes {
		testenv.WaitFor(t, n.ID+" to hold the backup's state", func() bool {
			_, got := testhooks.NodeLimitsDigest(n.Node())
			return hex.EncodeToString(got[:]) == want
		})
	}
	if p, err := dstClient.GetPolicy(ctx, "plan"); err != nil || p.Limit == nil || p.Limit.Rate != 5 {
		t.Fatalf("the backup's policy: %+v, %v", p, err)
	}
}
