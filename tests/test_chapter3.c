/* attn chapter3 against the tables printed in the seeds.
 *
 * Runs the attn program (ATTN_BINARY) for both dropout streams and checks, in
 * order, that under each caption the printed text is exactly the table the
 * seeds print: torch-mkl (default) against the book's tables in seeds 000 and
 * 001 (some shown from seed 002, which prints them in PyTorch's layout), and
 * --rng torch-cpu against seed 003 (Debian's non-MKL PyTorch). Each expected
 * text below is copied from the seed named in its comment. Where a seed shows a
 * table with changed whitespace (tabs in 001's blog, reStructuredText indent in
 * 002) the comment says so and the text is PyTorch's own layout. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* caption: text of a "-- " caption line (a prefix of it) to find next; NULL
 * means the expected text follows the previous step's text directly. */
typedef struct chapter_step {
    const char *caption;
    const char *expect;
} chapter_step;

static const chapter_step mkl_steps[] = {
    /* seed 000, In [10] (first table) */
    {"inputs:", "tensor([[0.4300, 0.1500, 0.8900],\n"
                "        [0.5500, 0.8700, 0.6600],\n"
                "        [0.5700, 0.8500, 0.6400],\n"
                "        [0.2200, 0.5800, 0.3300],\n"
                "        [0.7700, 0.2500, 0.1000],\n"
                "        [0.0500, 0.8000, 0.5500]])"},
    /* seed 000, In [2] (second line) */
    {"attention scores of query x^2", "tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])"},
    /* seed 001, "print(atten_scores_2.sum())" */
    {"their sum", "tensor(6.5617)"},
    /* seed 003, In [203] (seed 000, In [3] prints the same with the label "sum") */
    {"simple normalisation",
     "Attention weights: tensor([0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656])\n"
     "Sum: tensor(1.0000)"},
    /* seed 000, In [4] */
    {"naive softmax",
     "Attention weights: tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])\n"
     "Sum: tensor(1.)"},
    /* seed 000, In [5] */
    {"softmax (max-subtracted",
     "Attention weights: tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])\n"
     "Sum: tensor(1.)"},
    /* seed 001, "context_vec_2 = torch.zeros(query.shape)" output */
    {"context vector z^2 = sum_i", "tensor([0., 0., 0.])"},
    /* seed 000, In [6] */
    {NULL, "tensor([0.4419, 0.6515, 0.5683])"},
    /* seed 000, In [7] */
    {"attention scores, two for-loops",
     "tensor([[0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310],\n"
     "        [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],\n"
     "        [0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605],\n"
     "        [0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565],\n"
     "        [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935],\n"
     "        [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450]])"},
    /* seed 000, In [8] */
    {"the same by matrix multiplication",
     "tensor([[0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310],\n"
     "        [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],\n"
     "        [0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605],\n"
     "        [0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565],\n"
     "        [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935],\n"
     "        [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450]])"},
    /* seed 000, In [9] */
    {"attention weights: torch.softmax(attn_scores",
     "tensor([[0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452],\n"
     "        [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],\n"
     "        [0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565],\n"
     "        [0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720],\n"
     "        [0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295],\n"
     "        [0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896]])"},
    /* seed 000, In [9] (row sums) */
    {NULL, "All row sums: tensor([1.0000, 1.0000, 1.0000, 1.0000, 1.0000, 1.0000])"},
    /* seed 000, In [10] (third table) */
    {"all context vectors", "tensor([[0.4421, 0.5931, 0.5790],\n"
                            "        [0.4419, 0.6515, 0.5683],\n"
                            "        [0.4431, 0.6496, 0.5671],\n"
                            "        [0.4304, 0.6298, 0.5510],\n"
                            "        [0.4671, 0.5910, 0.5266],\n"
                            "        [0.4177, 0.6503, 0.5645]])"},
    /* seed 000, In [12] */
    {"torch.manual_seed(123); W_query, W_key, W_value", "Parameter containing:\n"
                                                        "tensor([[0.2961, 0.5166],\n"
                                                        "        [0.2517, 0.6886],\n"
                                                        "        [0.0740, 0.8665]])"},
    /* seed 000, In [12] */
    {NULL, "Parameter containing:\n"
           "tensor([[0.1366, 0.1025],\n"
           "        [0.1841, 0.7264],\n"
           "        [0.3153, 0.6871]])"},
    /* seed 000, In [12] */
    {NULL, "Parameter containing:\n"
           "tensor([[0.0756, 0.1966],\n"
           "        [0.3164, 0.4017],\n"
           "        [0.1186, 0.8274]])"},
    /* seed 000, In [13] */
    {"query_2 = x^2 @ W_query", "tensor([0.4306, 1.4551])\n"
                                "tensor([0.4433, 1.1419])\n"
                                "tensor([0.3951, 1.0037])"},
    /* seed 000, In [14] */
    {"keys = inputs @ W_key", "keys.shape: torch.Size([6, 2])\n"
                              "values.shape: torch.Size([6, 2])"},
    /* seed 002, "keys, values" (printed there inside a tuple, one column further right) */
    {NULL, "tensor([[0.3669, 0.7646],\n"
           "        [0.4433, 1.1419],\n"
           "        [0.4361, 1.1156],\n"
           "        [0.2408, 0.6706],\n"
           "        [0.1827, 0.3292],\n"
           "        [0.3275, 0.9642]])"},
    /* seed 002, "keys, values" */
    {NULL, "tensor([[0.1855, 0.8812],\n"
           "        [0.3951, 1.0037],\n"
           "        [0.3879, 0.9831],\n"
           "        [0.2393, 0.5493],\n"
           "        [0.1492, 0.3346],\n"
           "        [0.3221, 0.7863]])"},
    /* seed 000, In [15] (third print) */
    {"attention score omega_22", "tensor(1.8524)"},
    /* seed 000, In [15] (last print) */
    {"all attention scores of query 2", "tensor([1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440])"},
    /* seed 000, In [15] (after its label) */
    {"all attention scores: queries @ keys.T",
     "tensor([[0.9231, 1.3545, 1.3241, 0.7910, 0.4032, 1.1330],\n"
     "        [1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440],\n"
     "        [1.2544, 1.8284, 1.7877, 1.0654, 0.5508, 1.5238],\n"
     "        [0.6973, 1.0167, 0.9941, 0.5925, 0.3061, 0.8475],\n"
     "        [0.6114, 0.8819, 0.8626, 0.5121, 0.2707, 0.7307],\n"
     "        [0.8995, 1.3165, 1.2871, 0.7682, 0.3937, 1.0996]])"},
    /* seed 000, In [16] */
    {"their softmax without scaling", "tensor([[0.1484, 0.2285, 0.2217, 0.1301, 0.0883, 0.1831],\n"
                                      "        [0.1401, 0.2507, 0.2406, 0.1157, 0.0687, 0.1842],\n"
                                      "        [0.1406, 0.2496, 0.2397, 0.1164, 0.0696, 0.1841],\n"
                                      "        [0.1548, 0.2130, 0.2083, 0.1394, 0.1047, 0.1799],\n"
                                      "        [0.1577, 0.2067, 0.2028, 0.1428, 0.1122, 0.1777],\n"
                                      "        [0.1494, 0.2267, 0.2202, 0.1310, 0.0901, 0.1825]])"},
    /* seed 000, In [17] */
    {"scaled attention weights of query 2",
     "tensor([0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820])"},
    /* seed 000, In [19] */
    {"context vector z^2 = attn_weights_2 @ values", "tensor([0.3061, 0.8210])"},
    /* seed 000, In [21] */
    {"torch.manual_seed(123); sa_v1 = SelfAttention_v1",
     "tensor([[0.2996, 0.8053],\n"
     "        [0.3061, 0.8210],\n"
     "        [0.3058, 0.8203],\n"
     "        [0.2948, 0.7939],\n"
     "        [0.2927, 0.7891],\n"
     "        [0.2990, 0.8040]], grad_fn=<MmBackward0>)"},
    /* seed 000, In [24] */
    {"torch.manual_seed(789); sa_v2 = SelfAttention_v2",
     "tensor([[-0.0739,  0.0713],\n"
     "        [-0.0748,  0.0703],\n"
     "        [-0.0749,  0.0702],\n"
     "        [-0.0760,  0.0685],\n"
     "        [-0.0763,  0.0679],\n"
     "        [-0.0754,  0.0693]], grad_fn=<MmBackward0>)"},
    /* seed 000, In [25] */
    {"SelfAttention_v1 given sa_v2", "tensor([[-0.0739,  0.0713],\n"
                                     "        [-0.0748,  0.0703],\n"
                                     "        [-0.0749,  0.0702],\n"
                                     "        [-0.0760,  0.0685],\n"
                                     "        [-0.0763,  0.0679],\n"
                                     "        [-0.0754,  0.0693]], grad_fn=<MmBackward0>)"},
    /* seed 000, In [26] */
    {"attention weights of sa_v2 (seed 789)",
     "tensor([[0.1921, 0.1646, 0.1652, 0.1550, 0.1721, 0.1510],\n"
     "        [0.2041, 0.1659, 0.1662, 0.1496, 0.1665, 0.1477],\n"
     "        [0.2036, 0.1659, 0.1662, 0.1498, 0.1664, 0.1480],\n"
     "        [0.1869, 0.1667, 0.1668, 0.1571, 0.1661, 0.1564],\n"
     "        [0.1830, 0.1669, 0.1670, 0.1588, 0.1658, 0.1585],\n"
     "        [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]],\n"
     "       grad_fn=<SoftmaxBackward0>)"},
    /* seed 000, In [27] */
    {"mask_simple = torch.tril", "tensor([[1., 0., 0., 0., 0., 0.],\n"
                                 "        [1., 1., 0., 0., 0., 0.],\n"
                                 "        [1., 1., 1., 0., 0., 0.],\n"
                                 "        [1., 1., 1., 1., 0., 0.],\n"
                                 "        [1., 1., 1., 1., 1., 0.],\n"
                                 "        [1., 1., 1., 1., 1., 1.]])"},
    /* seed 000, In [28] (first table) */
    {"masked_simple = attn_weights * mask_simple",
     "tensor([[0.1921, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],\n"
     "        [0.2041, 0.1659, 0.0000, 0.0000, 0.0000, 0.0000],\n"
     "        [0.2036, 0.1659, 0.1662, 0.0000, 0.0000, 0.0000],\n"
     "        [0.1869, 0.1667, 0.1668, 0.1571, 0.0000, 0.0000],\n"
     "        [0.1830, 0.1669, 0.1670, 0.1588, 0.1658, 0.0000],\n"
     "        [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]],\n"
     "       grad_fn=<MulBackward0>)"},
    /* seed 000, In [28] (second table) */
    {"renormalised:", "tensor([[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],\n"
                      "        [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000],\n"
                      "        [0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000],\n"
                      "        [0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000],\n"
                      "        [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000],\n"
                      "        [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]],\n"
                      "       grad_fn=<DivBackward0>)"},
    /* seed 000, In [29] */
    {"scores masked with -inf", "tensor([[0.2899,   -inf,   -inf,   -inf,   -inf,   -inf],\n"
                                "        [0.4656, 0.1723,   -inf,   -inf,   -inf,   -inf],\n"
                                "        [0.4594, 0.1703, 0.1731,   -inf,   -inf,   -inf],\n"
                                "        [0.2642, 0.1024, 0.1036, 0.0186,   -inf,   -inf],\n"
                                "        [0.2183, 0.0874, 0.0882, 0.0177, 0.0786,   -inf],\n"
                                "        [0.3408, 0.1270, 0.1290, 0.0198, 0.1290, 0.0078]],\n"
                                "       grad_fn=<MaskedFillBackward0>)"},
    /* seed 000, In [30] */
    {"causal attention weights: torch.softmax(masked",
     "tensor([[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],\n"
     "        [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000],\n"
     "        [0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000],\n"
     "        [0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000],\n"
     "        [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000],\n"
     "        [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]],\n"
     "       grad_fn=<SoftmaxBackward0>)"},
    /* seed 001, "context_vec = attn_weights @ values" (the blog shows the 8-space indent as two
       tabs) */
    {"their context vectors with 3.4.1's values",
     "tensor([[0.1855, 0.8812],\n"
     "        [0.2795, 0.9361],\n"
     "        [0.3133, 0.9508],\n"
     "        [0.2994, 0.8595],\n"
     "        [0.2702, 0.7554],\n"
     "        [0.2772, 0.7618]], grad_fn=<MmBackward0>)"},
    /* seed 000, In [31] */
    {"torch.manual_seed(123); torch.nn.Dropout(0.5)(torch.ones(6, 6))",
     "tensor([[2., 2., 2., 2., 2., 2.],\n"
     "        [0., 2., 0., 0., 0., 0.],\n"
     "        [0., 0., 2., 0., 2., 0.],\n"
     "        [2., 2., 0., 0., 0., 2.],\n"
     "        [2., 0., 0., 0., 0., 2.],\n"
     "        [0., 2., 0., 0., 0., 0.]])"},
    /* seed 000, In [32] */
    {"torch.manual_seed(123); dropout(attn_weights)",
     "tensor([[2.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],\n"
     "        [0.0000, 0.8966, 0.0000, 0.0000, 0.0000, 0.0000],\n"
     "        [0.0000, 0.0000, 0.6206, 0.0000, 0.0000, 0.0000],\n"
     "        [0.5517, 0.4921, 0.0000, 0.0000, 0.0000, 0.0000],\n"
     "        [0.4350, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],\n"
     "        [0.0000, 0.3327, 0.0000, 0.0000, 0.0000, 0.0000]],\n"
     "       grad_fn=<MulBackward0>)"},
    /* seed 000, In [33] */
    {"batch = torch.stack", "tensor([[[0.4300, 0.1500, 0.8900],\n"
                            "         [0.5500, 0.8700, 0.6600],\n"
                            "         [0.5700, 0.8500, 0.6400],\n"
                            "         [0.2200, 0.5800, 0.3300],\n"
                            "         [0.7700, 0.2500, 0.1000],\n"
                            "         [0.0500, 0.8000, 0.5500]],\n"
                            "\n"
                            "        [[0.4300, 0.1500, 0.8900],\n"
                            "         [0.5500, 0.8700, 0.6600],\n"
                            "         [0.5700, 0.8500, 0.6400],\n"
                            "         [0.2200, 0.5800, 0.3300],\n"
                            "         [0.7700, 0.2500, 0.1000],\n"
                            "         [0.0500, 0.8000, 0.5500]]])"},
    /* seed 001, "print(batch.shape)" */
    {NULL, "torch.Size([2, 6, 3])"},
    /* seed 000, In [35] */
    {"torch.manual_seed(123); ca = CausalAttention", "context_vecs.shape: torch.Size([2, 6, 2])"},
    /* not printed in the seeds: PyTorch 1.13.1 (Debian) for the same code */
    {NULL, "tensor([[[-0.4519,  0.2216],\n"
           "         [-0.5874,  0.0058],\n"
           "         [-0.6300, -0.0632],\n"
           "         [-0.5675, -0.0843],\n"
           "         [-0.5526, -0.0981],\n"
           "         [-0.5299, -0.1081]],\n"
           "\n"
           "        [[-0.4519,  0.2216],\n"
           "         [-0.5874,  0.0058],\n"
           "         [-0.6300, -0.0632],\n"
           "         [-0.5675, -0.0843],\n"
           "         [-0.5526, -0.0981],\n"
           "         [-0.5299, -0.1081]]], grad_fn=<UnsafeViewBackward0>)"},
    /* seed 000, In [37] */
    {"torch.manual_seed(123); MultiHeadAttentionWrapper",
     "tensor([[[-0.4519,  0.2216,  0.4772,  0.1063],\n"
     "         [-0.5874,  0.0058,  0.5891,  0.3257],\n"
     "         [-0.6300, -0.0632,  0.6202,  0.3860],\n"
     "         [-0.5675, -0.0843,  0.5478,  0.3589],\n"
     "         [-0.5526, -0.0981,  0.5321,  0.3428],\n"
     "         [-0.5299, -0.1081,  0.5077,  0.3493]],\n"
     "\n"
     "        [[-0.4519,  0.2216,  0.4772,  0.1063],\n"
     "         [-0.5874,  0.0058,  0.5891,  0.3257],\n"
     "         [-0.6300, -0.0632,  0.6202,  0.3860],\n"
     "         [-0.5675, -0.0843,  0.5478,  0.3589],\n"
     "         [-0.5526, -0.0981,  0.5321,  0.3428],\n"
     "         [-0.5299, -0.1081,  0.5077,  0.3493]]], grad_fn=<CatBackward0>)\n"
     "context_vecs.shape: torch.Size([2, 6, 4])"},
    /* seed 002, "a @ a.transpose(2, 3)" (reStructuredText indent removed; seed 001 prints it with
       tabs) */
    {"batched matmul over (b, num_heads)", "tensor([[[[1.3208, 1.1631, 1.2879],\n"
                                           "          [1.1631, 2.2150, 1.8424],\n"
                                           "          [1.2879, 1.8424, 2.0402]],\n"
                                           "\n"
                                           "         [[0.4391, 0.7003, 0.5903],\n"
                                           "          [0.7003, 1.3737, 1.0620],\n"
                                           "          [0.5903, 1.0620, 0.9912]]]])"},
    /* seed 002 / seed 001, "First head:" / "Second head:" */
    {"each head on its own", "First head:\n"
                             " tensor([[1.3208, 1.1631, 1.2879],\n"
                             "        [1.1631, 2.2150, 1.8424],\n"
                             "        [1.2879, 1.8424, 2.0402]])\n"
                             "\n"
                             "Second head:\n"
                             " tensor([[0.4391, 0.7003, 0.5903],\n"
                             "        [0.7003, 1.3737, 1.0620],\n"
                             "        [0.5903, 1.0620, 0.9912]])"},
    /* seed 000, In [39]; shape line from seed 003, In [241] (seed 000 prints it with a trailing "
       ") */
    {"MultiHeadAttention(3, d_out=2", "tensor([[[0.3190, 0.4858],\n"
                                      "         [0.2943, 0.3897],\n"
                                      "         [0.2856, 0.3593],\n"
                                      "         [0.2693, 0.3873],\n"
                                      "         [0.2639, 0.3928],\n"
                                      "         [0.2575, 0.4028]],\n"
                                      "\n"
                                      "        [[0.3190, 0.4858],\n"
                                      "         [0.2943, 0.3897],\n"
                                      "         [0.2856, 0.3593],\n"
                                      "         [0.2693, 0.3873],\n"
                                      "         [0.2639, 0.3928],\n"
                                      "         [0.2575, 0.4028]]], grad_fn=<ViewBackward0>)\n"
                                      "context_vecs.shape: torch.Size([2, 6, 2])"},
    /* seed 000, In [40] */
    {"MultiHeadAttention(3, d_out=768",
     "tensor([[[ 0.0208, -0.1094, -0.1502,  ...,  0.3617,  0.2821,  0.0099],\n"
     "         [-0.0732, -0.1550, -0.1058,  ...,  0.4179,  0.2185,  0.0626],\n"
     "         [-0.1013, -0.1662, -0.0936,  ...,  0.4298,  0.1946,  0.0779],\n"
     "         [-0.1035, -0.1574, -0.0720,  ...,  0.3876,  0.1603,  0.0761],\n"
     "         [-0.0765, -0.1191, -0.0922,  ...,  0.3362,  0.1465,  0.0587],\n"
     "         [-0.0913, -0.1358, -0.0698,  ...,  0.3519,  0.1339,  0.0640]],\n"
     "\n"
     "        [[ 0.0208, -0.1094, -0.1502,  ...,  0.3617,  0.2821,  0.0099],\n"
     "         [-0.0732, -0.1550, -0.1058,  ...,  0.4179,  0.2185,  0.0626],\n"
     "         [-0.1013, -0.1662, -0.0936,  ...,  0.4298,  0.1946,  0.0779],\n"
     "         [-0.1035, -0.1574, -0.0720,  ...,  0.3876,  0.1603,  0.0761],\n"
     "         [-0.0765, -0.1191, -0.0922,  ...,  0.3362,  0.1465,  0.0587],\n"
     "         [-0.0913, -0.1358, -0.0698,  ...,  0.3519,  0.1339,  0.0640]]],\n"
     "       grad_fn=<ViewBackward0>)\n"
     "context_vecs.shape: torch.Size([2, 6, 768])"},
};

static const chapter_step cpu_steps[] = {
    /* seed 003, In [202] */
    {"attention scores of query x^2", "tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])"},
    /* seed 003, In [203] */
    {"simple normalisation",
     "Attention weights: tensor([0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656])\n"
     "Sum: tensor(1.0000)"},
    /* seed 003, In [204] */
    {"naive softmax",
     "Attention weights: tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])\n"
     "Sum: tensor(1.)"},
    /* seed 003, In [205] */
    {"softmax (max-subtracted",
     "Attention weights: tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])\n"
     "Sum: tensor(1.)"},
    /* seed 001 (zeros) */
    {"context vector z^2 = sum_i", "tensor([0., 0., 0.])"},
    /* seed 003, In [206] */
    {NULL, "tensor([0.4419, 0.6515, 0.5683])"},
    /* seed 003, In [207] */
    {"attention scores, two for-loops",
     "tensor([[0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310],\n"
     "        [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],\n"
     "        [0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605],\n"
     "        [0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565],\n"
     "        [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935],\n"
     "        [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450]])"},
    /* seed 003, In [208] */
    {"the same by matrix multiplication",
     "tensor([[0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310],\n"
     "        [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],\n"
     "        [0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605],\n"
     "        [0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565],\n"
     "        [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935],\n"
     "        [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450]])"},
    /* seed 003, In [210] */
    {"attention weights: torch.softmax(attn_scores",
     "tensor([[0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452],\n"
     "        [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],\n"
     "        [0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565],\n"
     "        [0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720],\n"
     "        [0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295],\n"
     "        [0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896]])"},
    /* seed 003, In [211] */
    {"all context vectors", "tensor([[0.4421, 0.5931, 0.5790],\n"
                            "        [0.4419, 0.6515, 0.5683],\n"
                            "        [0.4431, 0.6496, 0.5671],\n"
                            "        [0.4304, 0.6298, 0.5510],\n"
                            "        [0.4671, 0.5910, 0.5266],\n"
                            "        [0.4177, 0.6503, 0.5645]])"},
    /* seed 003, In [214] */
    {"query_2 = x^2 @ W_query", "tensor([0.4306, 1.4551])"},
    /* seed 003, In [215] */
    {"keys = inputs @ W_key", "keys.shape: torch.Size([6, 2])\n"
                              "values.shape: torch.Size([6, 2])"},
    /* seed 003, In [216] */
    {"attention score omega_22", "tensor(1.8524)"},
    /* seed 003, In [217] */
    {"all attention scores of query 2", "tensor([1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440])"},
    /* seed 003, In [218] */
    {"scaled attention weights of query 2",
     "tensor([0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820])"},
    /* seed 003, In [219] */
    {"context vector z^2 = attn_weights_2 @ values", "tensor([0.3061, 0.8210])"},
    /* seed 003, In [221] */
    {"SelfAttention_v1 with W_query = W_key = W_value",
     "tensor([[0.3306, 1.1527],\n"
     "        [0.3371, 1.1767],\n"
     "        [0.3368, 1.1755],\n"
     "        [0.3262, 1.1349],\n"
     "        [0.3245, 1.1272],\n"
     "        [0.3301, 1.1505]], grad_fn=<MmBackward0>)"},
    /* seed 003, In [223] */
    {"its SelfAttention_v2", "tensor([[0.3306, 1.1527],\n"
                             "        [0.3371, 1.1767],\n"
                             "        [0.3368, 1.1755],\n"
                             "        [0.3262, 1.1349],\n"
                             "        [0.3245, 1.1272],\n"
                             "        [0.3301, 1.1505]], grad_fn=<MmBackward0>)"},
    /* seed 003, In [226] */
    {"attention weights of seed 003's sa_v2 variant",
     "tensor([[0.1615, 0.2204, 0.2168, 0.1283, 0.1161, 0.1569],\n"
     "        [0.1565, 0.2404, 0.2353, 0.1154, 0.1016, 0.1508],\n"
     "        [0.1567, 0.2395, 0.2344, 0.1160, 0.1023, 0.1511],\n"
     "        [0.1631, 0.2065, 0.2040, 0.1380, 0.1286, 0.1598],\n"
     "        [0.1630, 0.2008, 0.1988, 0.1421, 0.1348, 0.1606],\n"
     "        [0.1615, 0.2187, 0.2153, 0.1295, 0.1178, 0.1571]],\n"
     "       grad_fn=<SoftmaxBackward0>)"},
    /* seed 003, In [227] */
    {"mask_simple = torch.tril", "tensor([[1., 0., 0., 0., 0., 0.],\n"
                                 "        [1., 1., 0., 0., 0., 0.],\n"
                                 "        [1., 1., 1., 0., 0., 0.],\n"
                                 "        [1., 1., 1., 1., 0., 0.],\n"
                                 "        [1., 1., 1., 1., 1., 0.],\n"
                                 "        [1., 1., 1., 1., 1., 1.]])"},
    /* seed 003, In [228] */
    {"masked_simple = attn_weights * mask_simple",
     "tensor([[0.1615, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],\n"
     "        [0.1565, 0.2404, 0.0000, 0.0000, 0.0000, 0.0000],\n"
     "        [0.1567, 0.2395, 0.2344, 0.0000, 0.0000, 0.0000],\n"
     "        [0.1631, 0.2065, 0.2040, 0.1380, 0.0000, 0.0000],\n"
     "        [0.1630, 0.2008, 0.1988, 0.1421, 0.1348, 0.0000],\n"
     "        [0.1615, 0.2187, 0.2153, 0.1295, 0.1178, 0.1571]],\n"
     "       grad_fn=<MulBackward0>)"},
    /* seed 003, In [229] */
    {"renormalised:", "tensor([[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],\n"
                      "        [0.3942, 0.6058, 0.0000, 0.0000, 0.0000, 0.0000],\n"
                      "        [0.2485, 0.3798, 0.3718, 0.0000, 0.0000, 0.0000],\n"
                      "        [0.2292, 0.2902, 0.2867, 0.1939, 0.0000, 0.0000],\n"
                      "        [0.1942, 0.2392, 0.2369, 0.1693, 0.1605, 0.0000],\n"
                      "        [0.1615, 0.2187, 0.2153, 0.1295, 0.1178, 0.1571]],\n"
                      "       grad_fn=<DivBackward0>)"},
    /* seed 003, In [230] */
    {"scores masked with -inf", "tensor([[1.2559,   -inf,   -inf,   -inf,   -inf,   -inf],\n"
                                "        [1.6951, 2.3026,   -inf,   -inf,   -inf,   -inf],\n"
                                "        [1.6722, 2.2722, 2.2421,   -inf,   -inf,   -inf],\n"
                                "        [0.9305, 1.2640, 1.2472, 0.6938,   -inf,   -inf],\n"
                                "        [0.7889, 1.0838, 1.0700, 0.5948, 0.5200,   -inf],\n"
                                "        [1.2143, 1.6432, 1.6211, 0.9020, 0.7681, 1.1753]],\n"
                                "       grad_fn=<MaskedFillBackward0>)"},
    /* seed 003, In [231] */
    {"causal attention weights: torch.softmax(masked",
     "tensor([[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],\n"
     "        [0.3942, 0.6058, 0.0000, 0.0000, 0.0000, 0.0000],\n"
     "        [0.2485, 0.3798, 0.3718, 0.0000, 0.0000, 0.0000],\n"
     "        [0.2292, 0.2902, 0.2867, 0.1939, 0.0000, 0.0000],\n"
     "        [0.1942, 0.2392, 0.2369, 0.1693, 0.1605, 0.0000],\n"
     "        [0.1615, 0.2187, 0.2153, 0.1295, 0.1178, 0.1571]],\n"
     "       grad_fn=<SoftmaxBackward0>)"},
    /* seed 003, In [232] */
    {"torch.manual_seed(123); torch.nn.Dropout(0.5)(torch.ones(6, 6))",
     "tensor([[2., 2., 0., 2., 2., 0.],\n"
     "        [0., 0., 0., 2., 0., 2.],\n"
     "        [2., 2., 2., 2., 0., 2.],\n"
     "        [0., 2., 2., 0., 0., 2.],\n"
     "        [0., 2., 0., 2., 0., 2.],\n"
     "        [0., 2., 2., 2., 2., 0.]])"},
    /* seed 003, In [233] */
    {"torch.manual_seed(123); dropout(attn_weights)",
     "tensor([[2.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],\n"
     "        [0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],\n"
     "        [0.4969, 0.7595, 0.7436, 0.0000, 0.0000, 0.0000],\n"
     "        [0.0000, 0.5803, 0.5735, 0.0000, 0.0000, 0.0000],\n"
     "        [0.0000, 0.4784, 0.0000, 0.3385, 0.0000, 0.0000],\n"
     "        [0.0000, 0.4374, 0.4307, 0.2590, 0.2356, 0.0000]],\n"
     "       grad_fn=<MulBackward0>)"},
    /* seed 003, In [236] */
    {"torch.manual_seed(123); ca = CausalAttention", "context_vecs.shape: torch.Size([2, 6, 2])"},
    /* seed 003, In [238] */
    {"torch.manual_seed(123); MultiHeadAttentionWrapper",
     "tensor([[[-0.4519,  0.2216,  0.4772,  0.1063],\n"
     "         [-0.5874,  0.0058,  0.5891,  0.3257],\n"
     "         [-0.6300, -0.0632,  0.6202,  0.3860],\n"
     "         [-0.5675, -0.0843,  0.5478,  0.3589],\n"
     "         [-0.5526, -0.0981,  0.5321,  0.3428],\n"
     "         [-0.5299, -0.1081,  0.5077,  0.3493]],\n"
     "\n"
     "        [[-0.4519,  0.2216,  0.4772,  0.1063],\n"
     "         [-0.5874,  0.0058,  0.5891,  0.3257],\n"
     "         [-0.6300, -0.0632,  0.6202,  0.3860],\n"
     "         [-0.5675, -0.0843,  0.5478,  0.3589],\n"
     "         [-0.5526, -0.0981,  0.5321,  0.3428],\n"
     "         [-0.5299, -0.1081,  0.5077,  0.3493]]], grad_fn=<CatBackward0>)\n"
     "context_vecs.shape: torch.Size([2, 6, 4])"},
    /* seed 003, In [241] */
    {"MultiHeadAttention(3, d_out=2", "tensor([[[0.3190, 0.4858],\n"
                                      "         [0.2943, 0.3897],\n"
                                      "         [0.2856, 0.3593],\n"
                                      "         [0.2693, 0.3873],\n"
                                      "         [0.2639, 0.3928],\n"
                                      "         [0.2575, 0.4028]],\n"
                                      "\n"
                                      "        [[0.3190, 0.4858],\n"
                                      "         [0.2943, 0.3897],\n"
                                      "         [0.2856, 0.3593],\n"
                                      "         [0.2693, 0.3873],\n"
                                      "         [0.2639, 0.3928],\n"
                                      "         [0.2575, 0.4028]]], grad_fn=<ViewBackward0>)\n"
                                      "context_vecs.shape: torch.Size([2, 6, 2])"},
    /* seed 000, In [40] (no dropout: the same in both streams) */
    {"MultiHeadAttention(3, d_out=768",
     "tensor([[[ 0.0208, -0.1094, -0.1502,  ...,  0.3617,  0.2821,  0.0099],\n"
     "         [-0.0732, -0.1550, -0.1058,  ...,  0.4179,  0.2185,  0.0626],\n"
     "         [-0.1013, -0.1662, -0.0936,  ...,  0.4298,  0.1946,  0.0779],\n"
     "         [-0.1035, -0.1574, -0.0720,  ...,  0.3876,  0.1603,  0.0761],\n"
     "         [-0.0765, -0.1191, -0.0922,  ...,  0.3362,  0.1465,  0.0587],\n"
     "         [-0.0913, -0.1358, -0.0698,  ...,  0.3519,  0.1339,  0.0640]],\n"
     "\n"
     "        [[ 0.0208, -0.1094, -0.1502,  ...,  0.3617,  0.2821,  0.0099],\n"
     "         [-0.0732, -0.1550, -0.1058,  ...,  0.4179,  0.2185,  0.0626],\n"
     "         [-0.1013, -0.1662, -0.0936,  ...,  0.4298,  0.1946,  0.0779],\n"
     "         [-0.1035, -0.1574, -0.0720,  ...,  0.3876,  0.1603,  0.0761],\n"
     "         [-0.0765, -0.1191, -0.0922,  ...,  0.3362,  0.1465,  0.0587],\n"
     "         [-0.0913, -0.1358, -0.0698,  ...,  0.3519,  0.1339,  0.0640]]],\n"
     "       grad_fn=<ViewBackward0>)\n"
     "context_vecs.shape: torch.Size([2, 6, 768])"},
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

typedef struct run_result {
    char *out;
    int status;
} run_result;

static run_result run_attn(const char *args) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s", ATTN_BINARY, args);
    FILE *p = popen(cmd, "r");
    cr_assert(p, "cannot run %s", cmd);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    cr_assert(buf);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (cap - len < 4096) {
            cap *= 2;
            buf = realloc(buf, cap);
            cr_assert(buf);
        }
    }
    buf[len] = '\0';
    int st = pclose(p);
    run_result r = {buf, WIFEXITED(st) ? WEXITSTATUS(st) : -1};
    return r;
}

/* The text after the next "-- " caption line (from pos on) that contains
 * caption; NULL if none. */
static const char *find_caption(const char *pos, const char *caption) {
    for (const char *c = strstr(pos, "\n-- "); c; c = strstr(c + 1, "\n-- ")) {
        const char *eol = strchr(c + 1, '\n');
        if (!eol) return NULL;
        size_t n = strlen(caption);
        for (const char *q = c; q + n <= eol; q++)
            if (strncmp(q, caption, n) == 0) return eol + 1;
    }
    return NULL;
}

static void check_steps(const char *args, const chapter_step *steps, size_t count) {
    run_result r = run_attn(args);
    cr_assert_eq(r.status, 0, "attn %s exited %d", args, r.status);
    const char *pos = r.out;
    for (size_t i = 0; i < count; i++) {
        if (steps[i].caption) {
            pos = find_caption(pos, steps[i].caption);
            cr_assert(pos, "attn %s: no caption with '%s' after the previous table", args,
                      steps[i].caption);
        }
        size_t n = strlen(steps[i].expect);
        int same = strncmp(pos, steps[i].expect, n) == 0 && pos[n] == '\n';
        if (!same) {
            char got[4096];
            size_t k = strlen(pos) < n + 40 ? strlen(pos) : n + 40;
            if (k >= sizeof got) k = sizeof got - 1;
            memcpy(got, pos, k);
            got[k] = '\0';
            cr_assert(same, "attn %s, step %zu (%s):\n--- expected\n%s\n--- attn printed\n%s", args,
                      i, steps[i].caption ? steps[i].caption : "(continued)", steps[i].expect, got);
        }
        pos += n + 1;
    }
    free(r.out);
}

Test(chapter3, torch_mkl_reproduces_the_books_tables) {
    check_steps("chapter3", mkl_steps, N_OF(mkl_steps));
}

Test(chapter3, explicit_torch_mkl_is_the_default) {
    run_result a = run_attn("chapter3");
    run_result b = run_attn("chapter3 --rng torch-mkl");
    cr_expect_eq(b.status, 0);
    cr_expect_str_eq(a.out, b.out);
    free(a.out);
    free(b.out);
}

Test(chapter3, torch_cpu_reproduces_seed_003) {
    check_steps("chapter3 --rng torch-cpu", cpu_steps, N_OF(cpu_steps));
    run_result a = run_attn("chapter3 --rng torch-cpu");
    run_result b = run_attn("chapter3 --rng=torch-cpu");
    cr_expect_str_eq(a.out, b.out);
    free(a.out);
    free(b.out);
}

Test(chapter3, help_and_bad_options) {
    run_result h = run_attn("chapter3 --help");
    cr_expect_eq(h.status, 0);
    cr_expect(strstr(h.out, "usage: attn chapter3") != NULL);
    free(h.out);
    const char *bad[] = {"chapter3 --bogus 2>&1", "chapter3 --rng 2>&1",
                         "chapter3 --rng torch-gpu 2>&1", "chapter3 extra 2>&1"};
    const char *why[] = {"unknown option '--bogus'", "--rng needs a value",
                         "--rng must be one of torch-mkl, torch-cpu, not 'torch-gpu'",
                         "unexpected argument 'extra'"};
    for (size_t i = 0; i < N_OF(bad); i++) {
        run_result r = run_attn(bad[i]);
        cr_expect_eq(r.status, 2, "attn %s exited %d", bad[i], r.status);
        cr_expect(strstr(r.out, "attn chapter3: ") != NULL, "attn %s: %s", bad[i], r.out);
        cr_expect(strstr(r.out, why[i]) != NULL, "attn %s: %s", bad[i], r.out);
        cr_expect(strstr(r.out, "tensor(") == NULL, "attn %s printed tables", bad[i]);
        free(r.out);
    }
}
