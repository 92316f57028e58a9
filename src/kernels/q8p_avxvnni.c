/*
 * q8p_avxvnni.c — q8p_avx2.c compiled a second time for AVX2 + AVX-VNNI, for the "avxvnni"
 * table (dispatch.c): the packed Q8_0 matmul of decode steps and prefills with one vpdpbusd
 * per dot step (vec_avx2_int.h's q8_dot_add), the long prefills through
 * kern_q8p_panels_avxvnni (matmul_avxvnni.c). Same bits as the AVX2 build and the scalar
 * reference (q8p_avx2.c notes 2-3). Compiled with the Makefile's AVX-VNNI flags.
 */
#define KERN_AVXVNNI 1
#include "kernels/q8p_avx2.c"
