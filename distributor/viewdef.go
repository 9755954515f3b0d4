package distributor

import (
	"encoding/binary"
	"maps"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/pgjson"
)

// A view's definition is what decides its rows: its query, its key, the columns its result
// has (names and types: a `SELECT *` gains a column when its table does, and a column
// whose type changed is encoded differently), and the tables and dependencies it names
// (they decide which tables' changes are captured for it). A wal view's query is taken as
// PostgreSQL reads it (capture.ViewDeps.Definition, from the session's analysis), so that
// a change of the text's layout alone is not one, and a database view it reads that was
// redefined is; a polled view's is its SQL text. Each epoch records it
// (record.EpochEnd.Def), and a restart compares the restored one with the configuration's:
// a view whose definition is unchanged is not read in full again (wal.go's warm start),
// one whose definition changed gets one reconcile epoch.
//
// encodingVersion names the record encoding of this code (schemas/record/pgjson): a change
// of how a value is written must bump it, so that every view is read in full once after
// the upgrade instead of keeping rows written the old way.
const encodingVersion = 1

// viewDef is the definition of st's rows when its query's result is what enc was compiled
// for: record.DefVersion, ':', 16 hex digits.
func viewDef(st *viewState, enc *pgjson.Encoder) string {
	v := st.cfg
	var b []byte
	str := func(s string) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	b = binary.BigEndian.AppendUint32(b, encodingVersion)
	if st.query != "" {
		str("analyzed")
		str(st.query)
	} else {
		str("text")
		str(v.SQL)
	}
	list := func(l []string) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(l)))
		for _, s := range l {
			str(s)
		}
	}
	list(v.Key)
	list(v.Tables)
	tables := slices.Sorted(maps.Keys(v.Depends))
	list(tables)
	for _, t := range tables {
		list(v.Depends[t])
	}
	var cols []pgjson.Column
	if enc != nil {
		cols = enc.Columns()
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(cols)))
	for _, c := range cols {
		str(c.Name)
		b = binary.BigEndian.AppendUint32(b, c.OID)
	}
	return record.DefVersion + ":" + record.FormatHash(xxhash.Sum64(b))
}
