/**
 * The shapes of the adapter's custom requests and events (docs/dap.md).
 * The replies and events typed in adapter/src/dap/replies.rs have an
 * interface of the same name here, which a test there
 * (adapter/src/dap/protocol_ts.rs) checks against them: members, `?` or
 * `| null` (may be missing), numbers, strings and booleans.
 */

export interface RunEvent {
	step: number;
	pid: number;
	tid: number;
	kind: string;
	text: string;
}

export interface Bookmark {
	step: number;
	note: string;
	created: number;
}

export interface Timeline {
	run: string;
	name: string;
	status: string;
	steps: number;
	virtualNs: number;
	forkOf: { parent: string; step: number } | null;
	events: RunEvent[];
	bookmarks: Bookmark[];
	perturbations: { step: number; what: string }[];
	deciding: number | null;
	compare?: { run: string; identical: boolean; step: number | null; otherStep: number | null } | null;
}

export interface Position {
	run: string;
	step: number;
	steps: number;
	stateStep: number;
	virtualNs: number;
	thread?: { pid: number; tid: number; name: string } | null;
	events: RunEvent[];
	inStep?: { step: number; pc: string; hit: number };
}

export interface LaneThread {
	pid: number;
	tid: number;
	name: string;
	stretches: [number, number][];
}

export interface Lanes {
	run: string;
	from: number;
	to: number;
	coarse: boolean;
	threads: LaneThread[];
	compare?: Lanes;
}

export interface CheckResult {
	index: number;
	label: string;
	run: string;
	status: string;
	steps: number;
	sameEnd: boolean;
	violations: { property: string; why: string }[];
}

/** The `rewind/checkResult` event. */
export interface CheckResultEvent {
	request: number;
	result: CheckResult;
}

/** `rewind/check`'s reply. */
export interface CheckReply {
	run: string;
	from: number;
	results: CheckResult[];
	violations: number;
	cancelled: boolean;
}

/** `rewind/fork`'s reply and the `rewind/forked` event. */
export interface Forked {
	parent: string;
	step: number;
	run: string;
	status: string;
	steps: number;
	with: { schedule?: number; seed?: number };
	firstDifference: number | null;
}

export interface Comparison {
	left: string;
	right: string;
	identical: boolean;
	events?: number;
	index?: number;
	leftStep?: number | null;
	rightStep?: number | null;
	shared?: RunEvent[];
	leftEvents?: RunEvent[];
	rightEvents?: RunEvent[];
}

/** `rewind/cat`'s reply. */
export interface CatReply {
	path: string;
	step: number;
	exists: boolean;
	size?: number;
	utf8?: boolean;
	text?: string;
}

/** `rewind/bookmark`'s reply. */
export interface BookmarksReply {
	added?: Bookmark;
	removed?: number;
	bookmarks: Bookmark[];
}

/** `rewind/events`' reply. */
export interface EventsReply {
	events: RunEvent[];
	truncated: boolean;
}

/** `rewind/goto`'s reply. */
export interface GotoReply {
	step: number;
}

/** A run, as `rewind/runs` and `rewind ls --json` give it. */
export interface RunInfo {
	id: string;
	name: string;
	status: string;
	exit_code: number;
	steps: number;
	virtual_ns: number;
	wall_secs: number;
	created: number;
	events: number;
	program: string;
	argv: string[];
	fork_of: { parent: string; step: number } | null;
	schedule: number;
}

/** `rewind/runs`' reply. */
export interface RunsReply {
	runs: RunInfo[];
}

/** What the extension posts to the timeline webview. */
export type ToTimeline =
	| { type: 'timeline'; timeline: Timeline }
	| { type: 'lanes'; lanes: Lanes }
	| { type: 'position'; position: Position }
	| { type: 'checkResults'; from: number; results: CheckResult[]; done: boolean }
	| { type: 'clear' };

/** What the timeline webview posts to the extension. */
export type FromTimeline =
	| { type: 'ready' }
	| { type: 'goto'; step: number }
	| { type: 'lanes'; from: number; to: number; max: number }
	| { type: 'pickCheck'; run: string }
	| { type: 'command'; command: string };
