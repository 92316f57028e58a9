/*
 * q4k_avxvnni.c — q4k_avx2.c compiled a second time for AVX2 + AVX-VNNI, for the "avxvnni"
 * table (dispatch.c): the Q4_K rows and the panel path of prefills (also the row-group
 * layout's, kern_q4kp_panels_avxvnni) with vpdpbusd sums per sub-block and vpdpwssd where a
 * scale or a min is applied (q4k_avx2.c note 6). Q5_K and Q6_K go to the AVX2 kernels, and
 * the Q8_K quantizer is not built again (the table uses kern_q8k_quantize_avx2). Same bits
 * as the AVX2 build and the scalar reference. Compiled with the Makefile's AVX-VNNI flags.
 */
#define KERN_AVXVNNI 1
#include "kernels/q4k_avx2.c"
