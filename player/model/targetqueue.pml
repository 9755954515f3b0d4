/*
 * The LogPlayer target-queue protocol for one target (the paper's Algorithms 1-5 and its
 * PlusCal model), as statecast's player implements it. README.md maps it to the code.
 *
 *   spin -a targetqueue.pml && cc -O2 -o pan pan.c && ./pan                     safety
 *   spin -DLIVENESS -a targetqueue.pml && cc -O2 -DNFAIR=4 -o pan pan.c && ./pan -a -f
 *                                                                               liveness
 *   spin -DNOTERMS -a targetqueue.pml && cc -O2 -o pan pan.c && ./pan            mutant
 *
 * Switches: -DNMESSAGES=n -DNFAILURES=n -DNOVERFLOWS=n. Mutants that spin must reject:
 *   NOTERMS            pushes and fetchingCompleted ignore the term (the paper's first draft);
 *   OVERFLOW_FROM_ACK  after a byte-budget overflow in N, recover from the ack instead of
 *                      the last index written to the stream;
 *   NOFETCHCOMPLETE    the recovery fetcher never calls fetchingCompleted (breaks liveness:
 *                      shows that the liveness property is not vacuous).
 */

#ifndef NMESSAGES
#define NMESSAGES 4
#endif
#ifndef NFAILURES
#define NFAILURES 2
#endif
#ifndef NOVERFLOWS
#define NOVERFLOWS 1
#endif

mtype = { N, RF, FC, S };

mtype state = N;          /* the target queue's state */
byte  term = 1;           /* the target's term; grows on every comeback */
byte  last_ack;           /* highest index the target applied (durable at the target) */
byte  current_index;      /* last index of the main stream the dispatcher handled */
byte  last_sent;          /* highest index written to the target's stream (sentUpTo) */
byte  rec_end;            /* the recovery range ends here (recEnd) */
bool  dropped = false;    /* RF: main entries are skipped since an overflow (dropped) */
byte  dropped_upto;       /* highest main index skipped while dropped (droppedUpTo) */
byte  failures = 0;
byte  overflows = 0;

chan normal_queue  = [NMESSAGES] of { byte };   /* entries of the main stream */
chan catchup_queue = [NMESSAGES] of { byte };   /* entries of the recovery stream */
chan cq            = [NMESSAGES] of { byte };   /* written to the stream, not yet applied */
chan recovery      = [NFAILURES + NOVERFLOWS] of { byte, byte, byte };  /* term, from, to */

#ifdef NOTERMS
#define TERM_OK(t) true
#else
#define TERM_OK(t) (t == term)
#endif

inline clear_queue(q) {
	do
	:: q?_
	:: empty(q) -> break
	od
}

/* The byte budget is exceeded (at most NOVERFLOWS times, at any push): drop the normal
 * queue and continue from Kafka without disconnecting (target.pushMain). */
inline overflow(i) {
	overflows++;
	clear_queue(normal_queue);
	if
	:: state == RF -> dropped = true; dropped_upto = i
	:: state == N ->
		state = RF;
		rec_end = i;
#ifdef OVERFLOW_FROM_ACK
		recovery!term, last_ack + 1, i
#else
		recovery!term, last_sent + 1, i
#endif
	:: state == FC ->
		state = RF;
		recovery!term, rec_end + 1, i;
		rec_end = i
	fi
}

/* Main fetcher + dispatcher (Algorithm 3): starts after the restart point and dispatches
 * every index once, atomically with the target's lock (target.pushMain). */
proctype mainFetcher() {
	byte i = current_index + 1;
	do
	:: i <= NMESSAGES ->
		atomic {
			current_index = i;
			if
			:: last_ack >= i || state == S -> skip
			:: else ->
				if
				:: state == RF && dropped -> dropped_upto = i
				:: else ->
					normal_queue!i;     /* push(main, i, term): the term is current */
					if
					:: overflows < NOVERFLOWS -> overflow(i)
					:: true -> skip
					fi
				fi
			fi
		}
		i++
	:: else -> break
	od
}

/* A recovery fetcher (Algorithm 5, target.recoveryFetcher): reads [from, to] for the term of
 * the request, one push per step, racing with failures, comebacks and the dispatcher;
 * then fetchingCompleted (target.complete), which may extend the range when main entries
 * were dropped meanwhile. Two run concurrently, like goroutines of an old and a new term. */
proctype recoveryFetcher() {
	byte t, from, to, i;
	bool more;
end:	do
	:: recovery?t, from, to ->
		i = from;
		do
		:: i <= to ->
			atomic {  /* pushCatchup: the term, RF, not yet applied */
				if
				:: TERM_OK(t) && state == RF && i > last_ack -> catchup_queue!i
				:: else -> skip
				fi
			}
			i++
		:: else ->
#ifdef NOFETCHCOMPLETE
			break
#else
			atomic {  /* complete(t) */
				more = false;
				if
				:: TERM_OK(t) && state == RF && dropped ->
					dropped = false; rec_end = dropped_upto; to = dropped_upto; more = true
				:: TERM_OK(t) && state == RF && !dropped ->
					if
					:: empty(catchup_queue) -> state = N
					:: nempty(catchup_queue) -> state = FC
					fi
				:: else -> skip
				fi
			}
			if
			:: more -> skip
			:: else -> break
			fi
#endif
		od
	od
}

/* The sender (Algorithms 1-2, sendNext/nextBatch with batches of one entry): front and
 * pop of the queue chosen by the state; the write shows up at once (gRPC abstracted). */
proctype sender() {
	byte i;
end:	do
	:: atomic {
		(state == RF || state == FC) && nempty(catchup_queue) ->
			catchup_queue?i;
			if
			:: state == FC && empty(catchup_queue) -> state = N
			:: state == RF || nempty(catchup_queue) -> skip
			fi;
			cq!i;
			last_sent = i
	   }
	:: atomic { state == N && nempty(normal_queue) -> normal_queue?i; cq!i; last_sent = i }
	od
}

/* The target and the ack side (Algorithm 4): the target applies the entry, which must be
 * exactly the next one (no duplicate, no reordering: the paper's assert), and acks it. */
proctype target() {
	byte i;
end:	do
	:: atomic { cq?i -> assert(i == last_ack + 1); last_ack = i }
	od
}

/* Failures (Algorithm 5): up to NFAILURES disconnects, each followed by a comeback. A
 * failure loses what is in flight and suspends the queue (suspend: clear both queues, S);
 * the comeback (a new Subscribe resuming from last_ack) grows the term, enters RF and asks
 * for recovery of [last_ack+1, current_index]. */
proctype failure() {
	do
	:: failures < NFAILURES && state != S ->
		atomic {
			clear_queue(cq);
			clear_queue(normal_queue);
			clear_queue(catchup_queue);
			state = S;
			dropped = false;
			failures++
		}
		atomic {
			term++;
			state = RF;
			last_sent = last_ack;
			rec_end = current_index;
			recovery!term, last_ack + 1, current_index
		}
	:: break
	od
}

init {
	/* a player (re)start: the target's last ack is anywhere in [0, NMESSAGES] */
	atomic {
		select(last_ack : 0 .. NMESSAGES);
		current_index = last_ack;
		last_sent = last_ack;
		run mainFetcher();
		run recoveryFetcher();
		run recoveryFetcher();
		run sender();
		run target();
		run failure()
	}
}

#ifdef LIVENESS
ltl delivered { <> (last_ack == NMESSAGES) }
#endif
