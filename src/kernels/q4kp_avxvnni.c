/*
 * q4kp_avxvnni.c — q4kp_avx2.c compiled a second time for AVX2 + AVX-VNNI, for the "avxvnni"
 * table (kern_matmul_kp_avxvnni, kp.c): the Q4_K row-group layout's decode steps with one
 * vpdpbusd per weight vector and token, the sub-block sums scaled by vpmulld (q4kp_avx2.c
 * note 6), prefills through kern_q4kp_panels_avxvnni (q4k_avxvnni.c). Same bits as the AVX2
 * build and the scalar reference. Compiled with the Makefile's AVX-VNNI flags.
 */
#define KERN_AVXVNNI 1
#include "kernels/q4kp_avx2.c"
