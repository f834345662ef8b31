/* SPDX-License-Identifier: MIT */
/*
 * bpf/v8proc.h — the contract between bpf/v8.bpf.h (kernel side) and bpf/v8.c (the agent):
 * what the program needs to tell a V8 JavaScript frame from any other frame of a node
 * process. The agent fills an entry per process from the v8dbg_* postmortem symbols of its
 * node (or libnode.so*) file; the program knows no V8 version, only these numbers. Plain
 * fixed-width types.
 */
#ifndef EDGEPROF_BPF_V8PROC_H
#define EDGEPROF_BPF_V8PROC_H

/*
 * A frame is read as one window of V8_WIN_WORDS words from its frame pointer minus
 * V8_WIN_BELOW bytes: the slots V8 keeps below the frame pointer (v8dbg_off_fp_*: -40 to -8
 * in V8 10.2 and 11.3), the caller's frame pointer and the return address. The entry's
 * slots are word indexes into it.
 */
#define V8_WIN_BELOW 48
#define V8_WIN_WORDS 8
#define V8_WIN_FP (V8_WIN_BELOW / 8)	 /* the caller's frame pointer */
#define V8_WIN_RA (V8_WIN_BELOW / 8 + 1) /* the return address */

struct v8_proc {
	__u16 type_jsfunction_first; /* Map::instance_type of JSFunction and its subclasses */
	__u16 type_jsfunction_last;
	__u16 type_sfi;		   /* SHARED_FUNCTION_INFO_TYPE */
	__u8 off_map;		   /* HeapObject::map */
	__u8 off_instance_type;	   /* Map::instance_type (a u16) */
	__u8 off_shared;	   /* JSFunction::shared */
	__u8 slot_context;	   /* off_fp_context: a Context, or a frame-type marker (Smi) */
	__u8 slot_function;	   /* off_fp_function: the JSFunction */
	__u8 slot_bytecode_offset; /* off_fp_bytecode_offset: a Smi in interpreted frames */
};

/*
 * The record: after the native frames, two words per JavaScript frame, newest first: the
 * frame's pc (the sample's pc for the first frame walked, else the return address its callee
 * saved: the same word the native walk puts among the user frames), then the frame's
 * SharedFunctionInfo (untagged, 8-aligned) with V8_REC_INTERPRETED in bit 0 when the frame
 * runs bytecode (Ignition), and in bits 63..48 its bytecode offset plus one (0: none or past
 * 0xfffe). flags >> PROFILE_PY_SHIFT counts the words (PROFILE_F_V8).
 */
#define V8_REC_INTERPRETED 1ull
#define V8_REC_SFI_MASK 0xfffffffffff8ull

/* A caller's frame is at most this far above its callee's (a bad chain ends there). */
#define V8_MAX_FRAME_BYTES (1u << 20)

/* The counters (v8_counts, per CPU). */
#define V8_C_SAMPLES 0	 /* samples of a listed process with JavaScript frames */
#define V8_C_FRAMES 1	 /* frames recorded */
#define V8_C_NONE 2	 /* samples of a listed process without one (C++, GC, idle) */
#define V8_C_TRUNCATED 3 /* chains cut at CONFIG_BPF_V8_FRAMES or by the record's room */
#define V8_C_READ 4	 /* a read of the process's memory failed */
#define V8_C_N 5

#endif /* EDGEPROF_BPF_V8PROC_H */
