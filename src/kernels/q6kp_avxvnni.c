/*
 * q6kp_avxvnni.c — q6kp_avx2.c compiled a second time for AVX2 + AVX-VNNI, for the "avxvnni"
 * table (kern_matmul_kp_avxvnni, kp.c): the Q6_K row-group layout's decode steps and prefill
 * panels with four vpdpbusd per group of 16 values and token, the group's sum scaled by
 * vpmulld and the offset shares added by vpdpwssd (q6kp_avx2.c note 10). Same bits as the
 * AVX2 build and the scalar reference. Compiled with the Makefile's AVX-VNNI flags.
 */
#define KERN_AVXVNNI 1
#include "kernels/q6kp_avx2.c"
