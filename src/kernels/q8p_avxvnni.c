/*
 * q8p_avxvnni.c — q8p_avx2.c compiled a second time for AVX2 + AVX-VNNI, for the "avxvnni"
 * table (dispatch.c): the packed Q8_0 matmul of decode steps and prefills with vpdpbusd on the
 * layout's unsigned bytes, the chains started from the offset shares (q8p_avx2.c note 7), the
 * long prefills through kern_q8p_panels_avxvnni (matmul_avxvnni.c). Same bits as the AVX2
 * build and the scalar reference. Compiled with the Makefile's AVX-VNNI flags.
 */
#define KERN_AVXVNNI 1
#include "kernels/q8p_avx2.c"
